package generative

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/linalg"
)

// problem is Y with its support pattern in both layouts.
type problem struct {
	n, d  int
	y     []float64 // n×d row-major (observation j, neuron i at j*d+i)
	yT    []float64 // d×n
	pos   []bool    // n×d: Y_ji > PosTol
	posT  []bool    // d×n
	s     []int     // s_i = positives of neuron i
	maxY  float64
	normO float64 // ‖Y_Ω‖_F
}

func newProblem(Y *mat.Dense, posTol float64) *problem {
	n, d := Y.Dims()
	p := &problem{n: n, d: d, y: make([]float64, n*d), yT: make([]float64, d*n), pos: make([]bool, n*d), posT: make([]bool, d*n), s: make([]int, d)}
	ss := 0.0
	for j := 0; j < n; j++ {
		row := Y.RawRowView(j)
		for i := 0; i < d; i++ {
			v := row[i]
			p.y[j*d+i], p.yT[i*n+j] = v, v
			if v > posTol {
				p.pos[j*d+i], p.posT[i*n+j] = true, true
				p.s[i]++
				ss += v * v
			}
			p.maxY = math.Max(p.maxY, v)
		}
	}
	p.normO = math.Sqrt(ss)
	return p
}

// alsConfig selects Solver B or one of its baseline variants.
type alsConfig struct {
	k       int
	nuc     float64
	hinge   bool      // false: zeros are missing entries (baseline N4)
	offset  []float64 // non-nil: the offset is fixed to it (oracle N5), no gauge step
	maxIter int
	tol     float64
	stage   string
	prog    func(stage string, done, total int)
}

// alsState is the factorisation Z = V·Uᵀ + 1·oᵀ (n×d).
type alsState struct {
	u     []float64 // d×k
	v     []float64 // n×k
	o     []float64 // d
	iters int
	conv  bool
	obj   float64
}

// runALS is Solver B (ours, not in [MR18]): alternating exact minimisation of
//
//	J = ½Σ_Ω (U_i·V_j + o_i − Y_ji)² + ½Σ_{Ωᶜ} [U_i·V_j + o_i + ν_c]_+² + (η/2)(‖U‖² + ‖V‖²)
//
// over (U_i, o_i) per neuron and V_j per observation, each a convex
// piecewise-quadratic problem solved exactly by active-set Newton, followed
// by the gauge step that centres V. Started from the top-k right singular
// vectors of the column-centred Y (baseline N2).
func runALS(ctx context.Context, p *problem, cfg alsConfig) (*alsState, error) {
	n, d, k := p.n, p.d, cfg.k
	st := &alsState{u: make([]float64, d*k), v: make([]float64, n*k), o: make([]float64, d)}
	// Initialisation: Q = top-k right singular vectors of the centred Y, V₀ = Y_c·Q.
	yc := mat.NewDense(n, d, append([]float64(nil), p.y...))
	centreColumns(yc)
	_, _, q, err := linalg.TopK(yc, k)
	if err != nil {
		return nil, fmt.Errorf("initial SVD: %w", err)
	}
	var v0 mat.Dense
	v0.Mul(yc, q)
	copy(st.v, v0.RawMatrix().Data)
	if cfg.offset != nil {
		copy(st.o, cfg.offset)
	}
	s := &alsSweep{p: p, cfg: cfg, st: st, n: n, d: d, k: k}
	s.eta = 1e-9 * math.Max(p.maxY*p.maxY, 1e-300)
	s.fixed = cfg.offset != nil
	s.pu = k + 1 // unknowns per neuron: (U_i, o_i)
	if s.fixed {
		s.pu = k
	}
	s.feat = make([]float64, n*s.pu) // [V, 1] or V
	s.objRow = make([]float64, n)
	s.ws = make([]*newtonWS, 0)
	for w := 0; w < maxProcs(); w++ {
		s.ws = append(s.ws, newNewtonWS(max(n, d), s.pu))
	}
	var history []float64
	j0 := math.NaN()
	for sweep := 1; sweep <= cfg.maxIter; sweep++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.neuronStep()
		s.observationStep()
		obj := s.dataObjective()
		if !s.fixed {
			s.gauge()
		}
		st.iters, st.obj = sweep, obj
		if cfg.prog != nil {
			cfg.prog(cfg.stage, sweep, cfg.maxIter)
		}
		if math.IsNaN(j0) {
			j0 = obj
		}
		history = append(history, obj)
		if obj <= 1e-26*p.normO*p.normO {
			st.conv = true
			break
		}
		if len(history) > 10 && history[len(history)-11]-obj <= cfg.tol*j0 {
			st.conv = true
			break
		}
	}
	return st, nil
}

// alsSweep holds what runALS's steps share: the problem, the iterate, the
// ridge η, whether the offset is fixed, and the workspaces.
type alsSweep struct {
	p       *problem
	cfg     alsConfig
	st      *alsState
	n, d, k int
	eta     float64
	fixed   bool // the offset is given (cfg.offset), not fitted
	pu      int  // unknowns per neuron: (U_i, o_i), or U_i when fixed
	feat    []float64
	objRow  []float64
	ws      []*newtonWS
}

// neuronStep solves, per neuron i, for (U_i, o_i) (U_i alone when the
// offset is fixed) with V held: a censored least-squares problem on the
// features [V, 1], solved exactly by censoredNewton.
func (s *alsSweep) neuronStep() {
	p, cfg, st, n, k, pu, fixed, feat, ws, eta := s.p, s.cfg, s.st, s.n, s.k, s.pu, s.fixed, s.feat, s.ws, s.eta
	for j := 0; j < n; j++ {
		copy(feat[j*pu:j*pu+k], st.v[j*k:(j+1)*k])
		if !fixed {
			feat[j*pu+k] = 1
		}
	}
	reg := make([]float64, pu)
	for l := 0; l < k; l++ {
		reg[l] = eta
	}
	if !fixed {
		reg[k] = 1e-3 * eta
	}
	parallel.For(s.d, func(w, i int) {
		t := ws[w]
		tgt, eq, use := t.tgt[:n], t.eq[:n], t.use[:n]
		for j := 0; j < n; j++ {
			off := 0.0
			if fixed {
				off = st.o[i]
			}
			if p.posT[i*n+j] {
				tgt[j], eq[j], use[j] = p.yT[i*n+j]-off, true, true
			} else {
				tgt[j], eq[j], use[j] = -cfg.nuc-off, false, cfg.hinge
			}
		}
		x := t.x[:pu]
		copy(x[:k], st.u[i*k:(i+1)*k])
		if !fixed {
			x[k] = st.o[i]
		}
		censoredNewton(feat, n, pu, tgt, eq, use, reg, x, t)
		copy(st.u[i*k:(i+1)*k], x[:k])
		if !fixed {
			st.o[i] = x[k]
		}
	})
}

// observationStep solves, per observation j, for V_j with (U, o) held,
// keeping each row's objective in objRow.
func (s *alsSweep) observationStep() {
	p, cfg, st, d, k, ws := s.p, s.cfg, s.st, s.d, s.k, s.ws
	regV := make([]float64, k)
	for l := range regV {
		regV[l] = s.eta
	}
	parallel.For(s.n, func(w, j int) {
		t := ws[w]
		tgt, eq, use := t.tgt[:d], t.eq[:d], t.use[:d]
		for i := 0; i < d; i++ {
			if p.pos[j*d+i] {
				tgt[i], eq[i], use[i] = p.y[j*d+i]-st.o[i], true, true
			} else {
				tgt[i], eq[i], use[i] = -cfg.nuc-st.o[i], false, cfg.hinge
			}
		}
		x := t.x[:k]
		copy(x, st.v[j*k:(j+1)*k])
		s.objRow[j] = censoredNewton(st.u, d, k, tgt, eq, use, regV, x, t)
		copy(st.v[j*k:(j+1)*k], x)
	})
}

// dataObjective is the data part of J (without the ridge, whose slow
// drift along the scale symmetry U → U·s, V → V/s would keep a J-based
// test busy).
func (s *alsSweep) dataObjective() float64 {
	k := s.k
	obj := 0.0
	for j, v := range s.objRow {
		r := 0.0
		for _, x := range s.st.v[j*k : (j+1)*k] {
			r += x * x
		}
		obj += v - s.eta*r/2
	}
	return obj
}

// gauge is the gauge step: it centres V and moves its mean into the
// offset, which leaves U·V + o unchanged.
func (s *alsSweep) gauge() {
	st, n, d, k := s.st, s.n, s.d, s.k
	mean := make([]float64, k)
	for j := 0; j < n; j++ {
		for l := 0; l < k; l++ {
			mean[l] += st.v[j*k+l] / float64(n)
		}
	}
	for j := 0; j < n; j++ {
		for l := 0; l < k; l++ {
			st.v[j*k+l] -= mean[l]
		}
	}
	for i := 0; i < d; i++ {
		for l := 0; l < k; l++ {
			st.o[i] += st.u[i*k+l] * mean[l]
		}
	}
}

// newtonWS is per-worker scratch for censoredNewton.
type newtonWS struct {
	tgt, z, zn []float64
	eq, use    []bool
	act, actN  []bool
	x, xn, dir []float64
	h, rhs     []float64
}

func newNewtonWS(m, p int) *newtonWS {
	return &newtonWS{tgt: make([]float64, m), z: make([]float64, m), zn: make([]float64, m),
		eq: make([]bool, m), use: make([]bool, m), act: make([]bool, m), actN: make([]bool, m),
		x: make([]float64, p+1), xn: make([]float64, p+1), dir: make([]float64, p+1),
		h: make([]float64, (p+1)*(p+1)), rhs: make([]float64, p+1)}
}

// censoredNewton minimises, over x ∈ R^p (in place, warm-started),
//
//	J(x) = ½Σ_{eq} (f_j·x − t_j)² + ½Σ_{hinge} [f_j·x − t_j]_+² + ½Σ reg_l x_l²
//
// for the m rows f_j of F (m×p, row-major) that are used, by active-set
// (semismooth) Newton with an Armijo line search: the active set is the
// equalities plus the violated hinges; the Newton point minimises the
// quadratic of that set exactly, so when its own active set is the same it
// is the global minimiser (J is convex). It returns J at the answer.
func censoredNewton(F []float64, m, p int, t []float64, eq, use []bool, reg, x []float64, w *newtonWS) float64 {
	z, zn, act, actN := w.z[:m], w.zn[:m], w.act[:m], w.actN[:m]
	xn, dir, h, rhs := w.xn[:p], w.dir[:p], w.h[:p*p], w.rhs[:p]
	eval := func(x, z []float64, act []bool) float64 {
		return censoredObjective(F, m, p, t, eq, use, reg, x, z, act)
	}
	J := eval(x, z, act)
	for it := 0; it < 50; it++ {
		activeNormalEquations(F, m, p, t, act, reg, h, rhs)
		if !linalg.CholeskyInPlace(h, p) {
			return J
		}
		copy(xn, rhs)
		linalg.CholeskySolveInPlace(h, p, xn)
		Jn := eval(xn, zn, actN)
		same := true
		for j := 0; j < m; j++ {
			if act[j] != actN[j] {
				same = false
				break
			}
		}
		if Jn <= J {
			copy(x, xn)
			copy(z, zn)
			copy(act, actN)
			improved := J - Jn
			J = Jn
			if same || improved <= 1e-15*math.Max(J, 1e-300) {
				return J
			}
			continue
		}
		// The Newton point of the current piece increased J: backtrack along
		// the direction (a descent direction of the convex J).
		for l := range dir {
			dir[l] = xn[l] - x[l]
		}
		step := 0.5
		accepted := false
		for ls := 0; ls < 40; ls++ {
			for l := range xn {
				xn[l] = x[l] + step*dir[l]
			}
			if Jn = eval(xn, zn, actN); Jn < J {
				accepted = true
				break
			}
			step /= 2
		}
		if !accepted {
			return J
		}
		copy(x, xn)
		copy(z, zn)
		copy(act, actN)
		J = Jn
	}
	return J
}

// censoredObjective is censoredNewton's J at x: it writes the rows' values
// f_j·x to z and marks in act the rows of the active set (the equalities
// and the violated hinges).
func censoredObjective(F []float64, m, p int, t []float64, eq, use []bool, reg, x, z []float64, act []bool) float64 {
	J := 0.0
	for j := 0; j < m; j++ {
		if !use[j] {
			act[j] = false
			continue
		}
		f := F[j*p : (j+1)*p]
		s := 0.0
		for l, fl := range f {
			s += fl * x[l]
		}
		z[j] = s
		r := s - t[j]
		act[j] = eq[j] || r > 0
		if act[j] {
			J += r * r / 2
		}
	}
	for l := range x {
		J += reg[l] * x[l] * x[l] / 2
	}
	return J
}

// activeNormalEquations writes the normal equations of the active rows'
// quadratic, (Σ_act f_jᵀf_j + diag(reg))·x = Σ_act f_jᵀt_j, to h (p×p,
// both triangles) and rhs: the Newton system of censoredNewton's current
// piece.
func activeNormalEquations(F []float64, m, p int, t []float64, act []bool, reg, h, rhs []float64) {
	for l := range h {
		h[l] = 0
	}
	for l := range rhs {
		rhs[l] = 0
	}
	for j := 0; j < m; j++ {
		if !act[j] {
			continue
		}
		f := F[j*p : (j+1)*p]
		tj := t[j]
		for a, fa := range f {
			rhs[a] += fa * tj
			row := h[a*p : a*p+a+1]
			for b := range row {
				row[b] += fa * f[b]
			}
		}
	}
	for a := 0; a < p; a++ {
		h[a*p+a] += reg[a]
		for b := 0; b < a; b++ {
			h[b*p+a] = h[a*p+b]
		}
	}
}

// centreColumns subtracts each column's mean (the paper's row-centring
// M·P⊥ in our layout).
func centreColumns(m *mat.Dense) {
	r, c := m.Dims()
	mean := make([]float64, c)
	for i := 0; i < r; i++ {
		for j, v := range m.RawRowView(i) {
			mean[j] += v
		}
	}
	for j := range mean {
		mean[j] /= float64(r)
	}
	for i := 0; i < r; i++ {
		row := m.RawRowView(i)
		for j := range row {
			row[j] -= mean[j]
		}
	}
}
