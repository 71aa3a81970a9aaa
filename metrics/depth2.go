package metrics

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/scaledsum"
	"github.com/relurec/relurec/nn"
)

// ErrNotDepth2 reports a network that is not Linear → ReLU → Linear (biases
// allowed).
var ErrNotDepth2 = errs.New("metrics: not a depth-2 ReLU network (Linear → ReLU → Linear)", nil)

// ReLUCovariance returns E[ReLU(u·x + b)·ReLU(v·x + c)] for x ~ N(0, I) in
// closed form (not in [ATV21], which has only the Parseval series of
// Proposition B.1): with ρ the cosine of u and v, X = û·x and
// Y = v̂·x standard normal with correlation ρ, h = −b/‖u‖, k = −c/‖v‖,
// s = √(1−ρ²), L = Φ₂(−h, −k; ρ), A = φ(h)·Φ((ρh − k)/s), B = φ(k)·Φ((ρk − h)/s):
//
//	E[X·1] = A + ρB,  E[Y·1] = B + ρA,
//	E[XY·1] = ρL + ρhA + ρkB + (s/2π)·exp(−(h² − 2ρhk + k²)/(2s²)),
//	E[(X − h)(Y − k)·1] = E[XY·1] − k·E[X·1] − h·E[Y·1] + hk·L,
//
// with 1 = 1{X > h, Y > k}, times ‖u‖·‖v‖. |ρ| = 1 is taken as its
// one-dimensional limit; a zero u or v makes that factor the constant
// ReLU(b) or ReLU(c).
func ReLUCovariance(u []float64, b float64, v []float64, c float64) float64 {
	nu, nv := math.Sqrt(dotf(u, u)), math.Sqrt(dotf(v, v))
	switch {
	case nu == 0 && nv == 0:
		return math.Max(b, 0) * math.Max(c, 0)
	case nu == 0:
		return math.Max(b, 0) * nv * hermite.ReLUMean(c/nv)
	case nv == 0:
		return math.Max(c, 0) * nu * hermite.ReLUMean(b/nu)
	}
	rho := math.Max(-1, math.Min(1, dotf(u, v)/(nu*nv)))
	return nu * nv * reluCovUnit(b/nu, c/nv, rho)
}

// reluCovUnit is E[ReLU(X + b)·ReLU(Y + c)] for standard normal X, Y with
// correlation ρ.
func reluCovUnit(b, c, rho float64) float64 {
	h, k := -b, -c
	phi, Phi := hermite.NormPDF, hermite.NormCDF
	if rho >= 1-1e-14 {
		t := math.Max(h, k)
		return t*phi(t) + Phi(-t) - (h+k)*phi(t) + h*k*Phi(-t)
	}
	if rho <= -1+1e-14 {
		// Y = −X: ∫_{−b}^{c} (x + b)(c − x)·φ(x) dx.
		lo, hi := h, c
		if hi <= lo {
			return 0
		}
		m0 := Phi(hi) - Phi(lo)
		m1 := phi(lo) - phi(hi)
		m2 := lo*phi(lo) - hi*phi(hi) + m0
		return -m2 + (c-b)*m1 + b*c*m0
	}
	s := math.Sqrt((1 - rho) * (1 + rho))
	L := hermite.BivariateNormalCDF(b, c, rho)
	A := phi(h) * Phi((rho*h-k)/s)
	B := phi(k) * Phi((rho*k-h)/s)
	ex := A + rho*B
	ey := B + rho*A
	exy := rho*L + rho*h*A + rho*k*B + s/(2*math.Pi)*math.Exp(-(h*h-2*rho*h*k+k*k)/(2*s*s))
	return exy - k*ex - h*ey + h*k*L
}

// depth2Parts returns (W, b, A, c) of a Linear → ReLU → Linear network;
// missing biases are zero.
func depth2Parts(name string, net *nn.MLP) (W *mat.Dense, b []float64, A *mat.Dense, c []float64, err error) {
	if net == nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s network is nil", ErrShape, name)
	}
	if len(net.Layers) != 2 {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s has %d layers, want 2", ErrNotDepth2, name, len(net.Layers))
	}
	if err := net.Validate(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrShape, name, err)
	}
	l0, l1 := net.Layers[0], net.Layers[1]
	if l0.Act != nn.ReLU || l1.Act != nn.Identity {
		return nil, nil, nil, nil, fmt.Errorf("%w: %s has activations (%s, %s), want (relu, identity)", ErrNotDepth2, name, l0.Act, l1.Act)
	}
	b = make([]float64, l0.Out())
	copy(b, l0.Bias)
	c = make([]float64, l1.Out())
	copy(c, l1.Bias)
	return l0.Weight, b, l1.Weight, c, nil
}

// L2Depth2 returns E_x ‖f(x) − g(x)‖² for x ~ N(0, I_d), the squared L2
// distance between two depth-2 ReLU networks with biases (any widths, the
// same d and number of outputs), in closed form: a double sum of
// ReLUCovariance over the units of both networks plus the output biases
// (ReLUCovariance). The Hermite (Parseval) series of [ATV21, Proposition
// B.1] converges too slowly to serve (1e-4 left after 60 terms). It is exact up to rounding, but a
// difference of large sums: distances below ~1e-8·E‖f‖² (relative, squared
// ~1e-16) are rounding noise.
func L2Depth2(f, g *nn.MLP) (float64, error) {
	Wf, bf, Af, cf, err := depth2Parts("f", f)
	if err != nil {
		return 0, fmt.Errorf("metrics.L2Depth2: %w", err)
	}
	Wg, bg, Ag, cg, err := depth2Parts("g", g)
	if err != nil {
		return 0, fmt.Errorf("metrics.L2Depth2: %w", err)
	}
	_, d := Wf.Dims()
	_, dg := Wg.Dims()
	p, _ := Af.Dims()
	pg, _ := Ag.Dims()
	if d != dg || p != pg {
		return 0, fmt.Errorf("metrics.L2Depth2: %w: f maps %d → %d, g maps %d → %d", ErrShape, d, p, dg, pg)
	}
	// Units of f − g: rows, biases, output columns (g's negated).
	var rows [][]float64
	var bias []float64
	var cols [][]float64
	add := func(W *mat.Dense, b []float64, A *mat.Dense, sign float64) {
		m, _ := W.Dims()
		for i := 0; i < m; i++ {
			rows = append(rows, W.RawRowView(i))
			bias = append(bias, b[i])
			col := make([]float64, p)
			for t := range col {
				col[t] = sign * A.At(t, i)
			}
			cols = append(cols, col)
		}
	}
	add(Wf, bf, Af, 1)
	add(Wg, bg, Ag, -1)
	e := make([]float64, p)
	for t := range e {
		e[t] = cf[t] - cg[t]
	}
	total := dotf(e, e)
	for i := range rows {
		mean := unitMean(rows[i], bias[i])
		total += 2 * mean * dotf(cols[i], e)
		total += dotf(cols[i], cols[i]) * ReLUCovariance(rows[i], bias[i], rows[i], bias[i])
		for j := 0; j < i; j++ {
			if a := dotf(cols[i], cols[j]); a != 0 {
				total += 2 * a * ReLUCovariance(rows[i], bias[i], rows[j], bias[j])
			}
		}
	}
	return math.Max(total, 0), nil
}

// unitMean is E[ReLU(u·x + b)].
func unitMean(u []float64, b float64) float64 {
	nu := math.Sqrt(dotf(u, u))
	if nu == 0 {
		return math.Max(b, 0)
	}
	return nu * hermite.ReLUMean(b/nu)
}

func dotf(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Depth2Error is the distance between two depth-2 networks with biases up
// to their symmetries, after both are put in the paper's normalisation
// (‖w_i‖ = 1, b_i ← b_i/‖w_i‖, a_i ← a_i·‖w_i‖; [ATV21]).
type Depth2Error struct {
	// MaxErrW is max_i ‖ŵ_{π(i)} − w_i‖₂, MaxErrB max_i |b̂ − b|, MaxErrA
	// max_i ‖â_{:,π(i)} − a_{:,i}‖₂ (absolute), MaxErrC ‖ĉ − c‖_∞ (output
	// biases), over matched units (with their sign flip applied when
	// allowed).
	MaxErrW float64 `json:"max_err_w"`
	MaxErrB float64 `json:"max_err_b"`
	MaxErrA float64 `json:"max_err_a"`
	MaxErrC float64 `json:"max_err_c"`
	// MaxErr is the largest of the four: the "max parameter error".
	MaxErr float64 `json:"max_err"`
	// Perm[i] is the estimate's unit matched to the truth's unit i (−1 when
	// unmatched); Flipped[i] reports that the match is the sign flip.
	Perm    []int  `json:"perm"`
	Flipped []bool `json:"flipped,omitempty"`
	// Missing counts truth units with no estimate unit (the estimate has
	// fewer); Extra counts estimate units left unmatched.
	Missing int `json:"missing"`
	Extra   int `json:"extra"`
}

// CompareDepth2 measures how far est is from truth up to permutation of the
// hidden units and positive scaling, and, with allowFlip, the joint sign
// flip (w_i, b_i) → (−w_i, −b_i) that the overcomplete case (ℓ = 2) cannot
// resolve ([ATV21, Claim 4.7]). Both must be Linear → ReLU → Linear with the
// same d and outputs; widths may differ (units are matched by the
// assignment minimising Σ ‖w − ŵ‖² + (b − b̂)², Hungarian; unmatched units
// are counted, not scored). A flip changes the function by an affine term,
// so allowFlip compares parameters, not functions; use L2Depth2 for the
// function. Dead units (zero rows of W, a constant ReLU(b)) are not
// matched; a network with no other unit gives ErrZeroRow.
func CompareDepth2(truth, est *nn.MLP, allowFlip bool) (Depth2Error, error) {
	Wt, bt, At, ct, err := depth2Parts("truth", truth)
	if err != nil {
		return Depth2Error{}, fmt.Errorf("metrics.CompareDepth2: %w", err)
	}
	We, be, Ae, ce, err := depth2Parts("est", est)
	if err != nil {
		return Depth2Error{}, fmt.Errorf("metrics.CompareDepth2: %w", err)
	}
	mt, d := Wt.Dims()
	me, de := We.Dims()
	p, _ := At.Dims()
	pe, _ := Ae.Dims()
	if d != de || p != pe {
		return Depth2Error{}, fmt.Errorf("metrics.CompareDepth2: %w: truth maps %d → %d, est maps %d → %d", ErrShape, d, p, de, pe)
	}
	// Dead units (zero rows: the constant ReLU(b)) have no direction to
	// match; they are left out (their constant is part of the function,
	// which L2Depth2 compares).
	totalT := mt
	Wt, bt, At, keepT := liveRows(Wt, bt, At)
	We, be, Ae, keepE := liveRows(We, be, Ae)
	if Wt == nil || We == nil {
		return Depth2Error{}, fmt.Errorf("metrics.CompareDepth2: %w: a network has no unit with a non-zero weight row", ErrZeroRow)
	}
	mt, _ = Wt.Dims()
	me, _ = We.Dims()
	um := &unitMatch{d: d, bt: bt, be: be, allowFlip: allowFlip}
	if um.wt, um.nt, err = normaliseRows("truth W", Wt); err != nil {
		return Depth2Error{}, fmt.Errorf("metrics.CompareDepth2: %w", err)
	}
	if um.we, um.ne, err = normaliseRows("est W", We); err != nil {
		return Depth2Error{}, fmt.Errorf("metrics.CompareDepth2: %w", err)
	}
	res := Depth2Error{Perm: make([]int, mt)}
	if allowFlip {
		res.Flipped = make([]bool, mt)
	}
	for i := range res.Perm {
		res.Perm[i] = -1
	}
	um.assign(&res, mt, me)
	um.unitErrors(&res, At, Ae)
	for t := 0; t < p; t++ {
		res.MaxErrC = math.Max(res.MaxErrC, math.Abs(ce[t]-ct[t]))
	}
	res.MaxErr = math.Max(math.Max(res.MaxErrW, res.MaxErrB), math.Max(res.MaxErrA, res.MaxErrC))
	// Report unit indices of the networks as given.
	perm := make([]int, totalT)
	for i := range perm {
		perm[i] = -1
	}
	var flipped []bool
	if allowFlip {
		flipped = make([]bool, totalT)
	}
	for i, j := range res.Perm {
		if j >= 0 {
			perm[keepT[i]] = keepE[j]
		}
		if allowFlip {
			flipped[keepT[i]] = res.Flipped[i]
		}
	}
	res.Perm, res.Flipped = perm, flipped
	res.Missing += totalT - mt
	return res, nil
}

// unitMatch holds the live units of CompareDepth2's two networks with
// unit rows: wt, we the normalised rows of W, nt, ne their norms, bt, be
// the biases (divided by the norms where used).
type unitMatch struct {
	d         int
	wt, we    *mat.Dense
	nt, ne    []float64
	bt, be    []float64
	allowFlip bool
}

// unitB is bias i scaled to its unit row.
func unitB(b []float64, n []float64, i int) float64 { return b[i] / n[i] }

// cost is the squared distance ‖w − ŵ‖² + (b − b̂)² between truth unit i
// and est unit j on unit rows, and whether the flipped est unit (−ŵ, −b̂)
// is the nearer (with allowFlip).
func (um *unitMatch) cost(i, j int) (float64, bool) {
	c := func(xi float64) float64 {
		s := 0.0
		for l := 0; l < um.d; l++ {
			x := xi*um.we.At(j, l) - um.wt.At(i, l)
			s += x * x
		}
		x := xi*unitB(um.be, um.ne, j) - unitB(um.bt, um.nt, i)
		return s + x*x
	}
	plus := c(1)
	if !um.allowFlip {
		return plus, false
	}
	if minus := c(-1); minus < plus {
		return minus, true
	}
	return plus, false
}

// assign matches the mt truth units to the me est units by the assignment
// of least total cost (Hungarian, which needs rows ≤ columns), into
// res.Perm, and counts the units left unmatched.
func (um *unitMatch) assign(res *Depth2Error, mt, me int) {
	if mt <= me {
		cm := make([][]float64, mt)
		for i := range cm {
			cm[i] = make([]float64, me)
			for j := range cm[i] {
				cm[i][j], _ = um.cost(i, j)
			}
		}
		copy(res.Perm, hungarian(cm))
		res.Extra = me - mt
		return
	}
	cm := make([][]float64, me)
	for j := range cm {
		cm[j] = make([]float64, mt)
		for i := range cm[j] {
			cm[j][i], _ = um.cost(i, j)
		}
	}
	for j, i := range hungarian(cm) {
		res.Perm[i] = j
	}
	res.Missing = mt - me
}

// unitErrors scores the matched units: the largest errors of the unit
// rows, biases and output columns At, Ae (scaled by the row norms), with
// flips where cost chose them.
func (um *unitMatch) unitErrors(res *Depth2Error, At, Ae *mat.Dense) {
	d, we, wt, ne, nt := um.d, um.we, um.wt, um.ne, um.nt
	p, _ := At.Dims()
	for i, j := range res.Perm {
		if j < 0 {
			continue
		}
		_, flip := um.cost(i, j)
		xi := 1.0
		if flip {
			xi = -1
			res.Flipped[i] = true
		}
		var dw scaledsum.Sum
		for l := 0; l < d; l++ {
			dw.Add(xi*we.At(j, l) - wt.At(i, l))
		}
		res.MaxErrW = math.Max(res.MaxErrW, dw.Norm())
		res.MaxErrB = math.Max(res.MaxErrB, math.Abs(xi*unitB(um.be, ne, j)-unitB(um.bt, nt, i)))
		var da scaledsum.Sum
		for t := 0; t < p; t++ {
			da.Add(Ae.At(t, j)*ne[j] - At.At(t, i)*nt[i])
		}
		res.MaxErrA = math.Max(res.MaxErrA, da.Norm())
	}
}

// liveRows returns W, b and A without the units whose row of W is zero and
// the original indices of the units kept. W is nil when no unit is left.
func liveRows(W *mat.Dense, b []float64, A *mat.Dense) (*mat.Dense, []float64, *mat.Dense, []int) {
	m, d := W.Dims()
	p, _ := A.Dims()
	var idx []int
	for i := 0; i < m; i++ {
		if norm2(W.RawRowView(i)) > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == m {
		return W, b, A, idx
	}
	if len(idx) == 0 {
		return nil, nil, nil, nil
	}
	W2 := mat.NewDense(len(idx), d, nil)
	A2 := mat.NewDense(p, len(idx), nil)
	b2 := make([]float64, len(idx))
	for k, i := range idx {
		W2.SetRow(k, W.RawRowView(i))
		A2.SetCol(k, mat.Col(nil, i, A))
		b2[k] = b[i]
	}
	return W2, b2, A2, idx
}
