package twolayer

// Rectified activations other than the ReLU (Bakshi et al. App. 9.1,
// [BJW19, App. 9.1]): φ(x) = max(x,0)^c and φ(x) = e^{max(x,0)} − 1. The
// routes differ from the ReLU's in four places only:
//
//   - TensorStart takes its moment order r = argmax_{r∈{3,4}} |c_r(φ)| and
//     the order-1/order-2 normalisations c_1, c_2 from φ's Hermite
//     coefficients (hermite.RectPow, hermite.RectExp).
//   - ExactPolish keeps the zero pattern step (it only needs φ(x) = 0 ⇔
//     x ≤ 0) and inverts φ on the positive entries of the unit's activation
//     r = s·φ(X·v*) read off the column span of Y, whose scale s is unknown.
//     For x^c the scale passes through φ⁻¹ (s^{1/c}·X·v*), so the row is
//     found up to the positive scaling Canonical removes. For e^x − 1 it
//     does not, and s is resolved first: see expScale.
//   - SolveU, RecoverSigns and Refine use φ and φ′.
//   - Rows of V are normalised only for homogeneous φ; e^x − 1 keeps norms.

import (
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// checkActivation accepts the rectified activations this package handles.
func checkActivation(a nn.Activation) error {
	if a == "" || a == nn.ReLU {
		return nil
	}
	if !a.Valid() {
		if p, err := nn.ParseActivation(string(a)); err == nil {
			return fmt.Errorf("%w: activation %q is not spelled canonically; use %q (nn.ParseActivation)", ErrInput, a, p)
		}
		return fmt.Errorf("%w: unknown activation %q; want relu, relupow<c> with c > 0 (e.g. relupow2) or reluexp", ErrInput, a)
	}
	if !a.Rectified() {
		return fmt.Errorf("%w: activation %q is not rectified (zero for x ≤ 0, increasing for x > 0); the two-layer routes need relu, relupow<c> or reluexp", ErrInput, a)
	}
	return nil
}

// hermiteActivation returns the hermite view of a (its Gaussian Hermite
// coefficients), a having passed checkActivation.
func hermiteActivation(a nn.Activation) hermite.Activation {
	if a == nn.RectExp {
		return hermite.RectExp{}
	}
	if c, ok := a.Power(); ok && c != 1 {
		return hermite.RectPow{C: c}
	}
	return hermite.ReLU{}
}

// homogeneous reports whether rows of V may be normalised (φ(s·x) = s^a·φ(x)).
func homogeneous(a nn.Activation) bool {
	_, ok := a.Homogeneity()
	return ok
}

// activationsOf returns φ(X·Vᵀ) (n×k). The ReLU keeps its branch-free loop.
func activationsOf(X, V *mat.Dense, act nn.Activation) *mat.Dense {
	return activationsTo(nil, X, V, act)
}

// activationsTo is activationsOf computed into buf, whatever it holds, when
// it has room for the n×k entries (see newDenseIn): same bits, no new n×k
// matrix.
func activationsTo(buf []float64, X, V *mat.Dense, act nn.Activation) *mat.Dense {
	if act == "" || act == nn.ReLU {
		return activationsIn(buf, X, V)
	}
	n, _ := X.Dims()
	k, _ := V.Dims()
	F := newDenseIn(buf, n, k)
	mulRowsPar(F, X, mat.DenseCopyOf(V.T()))
	f := act.Func()
	data := F.RawMatrix().Data
	for i, v := range data {
		data[i] = f(v)
	}
	return F
}

// checkFinite returns an error naming the overflow when F has a non-finite
// entry (e^x − 1 overflows for x > 709).
func checkFinite(F *mat.Dense, act nn.Activation) error {
	for i, v := range F.RawMatrix().Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			k := F.RawMatrix().Cols
			return fmt.Errorf("%w: the hidden activation %s of sample %d, unit %d is %v (overflow): the weights are too large for this activation; rescale X", ErrInput, act, i/k, i%k, v)
		}
	}
	return nil
}

// SolveU returns the least-squares output weights U (m×k) of
// Y ≈ ReLU(X·Vᵀ)·Uᵀ — the regression of Lemma 20 (and steps 6–7 of Alg 4),
// solved by QR of the n×k activation matrix, never the normal equations —
// together with κ(ReLU(X·Vᵀ)).
//
// For the activation act: the least-squares U (m×k) of
// Y ≈ φ(X·Vᵀ)·Uᵀ and κ(φ(X·Vᵀ)). It fails with an error wrapping ErrInput
// if φ overflows.
// act "" means nn.ReLU. X must be n×d, Y n×m and V k×d, all finite; other
// shapes (or nil) give an error wrapping ErrInput that says what was
// expected.
func SolveU(X, Y, V *mat.Dense, act nn.Activation) (*mat.Dense, float64, error) {
	if _, _, _, _, err := checkXYV("twolayer.SolveU", X, Y, V, "V"); err != nil {
		return nil, math.Inf(1), err
	}
	if err := checkActivation(act); err != nil {
		return nil, math.Inf(1), err
	}
	U, F, err := solveU(X, Y, V, act)
	if err != nil {
		return nil, math.Inf(1), err
	}
	return U, linalg.Cond(F), nil
}

// solveU is SolveU on checked arguments, without κ: the least-squares U and
// the activations F = φ(X·Vᵀ) it was fitted to (for a certificate that
// reuses them).
func solveU(X, Y, V *mat.Dense, act nn.Activation) (U, F *mat.Dense, err error) {
	return solveUTo(nil, X, Y, V, act)
}

// solveUTo is solveU with F computed into buf when it has room (see
// activationsTo).
func solveUTo(buf []float64, X, Y, V *mat.Dense, act nn.Activation) (U, F *mat.Dense, err error) {
	F = activationsTo(buf, X, V, act)
	if err := checkFinite(F, act); err != nil {
		return nil, nil, err
	}
	U, err = lstsqU(F, Y)
	return U, F, err
}

// lstsqU is U (m×k) of the least-squares fit Y ≈ F·Uᵀ.
func lstsqU(F, Y mat.Matrix) (*mat.Dense, error) {
	Ut, err := linalg.LstSq(F, Y)
	if err != nil {
		return nil, fmt.Errorf("twolayer: output weights: the hidden activations are rank deficient (%w)", err)
	}
	return mat.DenseCopyOf(Ut.T()), nil
}

// relResidualAct returns ‖Y − φ(X·Vᵀ)·Uᵀ‖_F/‖Y‖_F.
func relResidualAct(X, Y, V, U *mat.Dense, act nn.Activation) float64 {
	return residualOf(activationsOf(X, V, act), Y, U)
}

// expScale resolves the unknown output scale of a rectified-exponential
// unit: on its active samples P the unit's activation read off span(Y) is
// r_P = s·(e^{X_P·v} − 1) with s > 0 and v unknown, so for a = 1/s the
// vector h(a) = log(1 + a·r_P) must lie in the column space of X_P exactly.
// A 1-D search over s minimising the residual of X_P·z = φ⁻¹(r_P/s) would
// find it; this is that search made exact and fast by variable projection: ρ(b) = ‖(I − QQᵀ)·h(e^b)‖² with Q an orthonormal basis of
// col(X_P) is a function of b = log a alone; a coarse grid over 24 natural
// log-units around 1/median(r) brackets the minimum and Gauss–Newton on b
// (derivative ∂h/∂b = a·r/(1 + a·r), projected) converges quadratically to
// the zero-residual root, since noiseless data have ρ(b*) = 0. The root is
// unique: log(1 + (a/a*)(e^t − 1)) is linear in t only for a = a*.
// As a → 0 the model degenerates to a linear one (log(1 + a·r) ≈ a·r), so a
// root with a·median(r) < 1e-5 is refused as "linear, not e^x − 1".
// It returns a = 1/s, the row z (with its norm) and the relative residual
// ‖(I − QQᵀ)h‖/‖h‖ at the root.
func expScale(XP *mat.Dense, rP []float64) (a float64, z []float64, rel float64, err error) {
	p, _ := XP.Dims()
	Q, err := linalg.Orth(XP)
	if err != nil {
		return 0, nil, 0, err
	}
	_, rank := Q.Dims()
	ep := &expProjection{Q: Q, rP: rP, h: make([]float64, p), dh: make([]float64, p), coef: make([]float64, rank), res: make([]float64, p), resD: make([]float64, p)}
	h, rho := ep.h, ep.rho
	sorted := append([]float64(nil), rP...)
	med := quickMedian(sorted)
	if !(med > 0) {
		return 0, nil, 0, fmt.Errorf("the active entries are not positive")
	}
	b0 := -math.Log(med)
	best, bestB := math.Inf(1), b0
	for t := -12.0; t <= 12; t += 0.5 {
		// Compare relative residuals: ‖h‖ grows with a.
		v := rho(b0 + t)
		hh := dot(h, h)
		if hh > 0 && v/hh < best {
			best, bestB = v/hh, b0+t
		}
	}
	b, cur := ep.gaussNewton(bestB)
	a = math.Exp(b)
	if a*med < 1e-5 {
		// As a → 0, log(1 + a·r) → a·r: a unit linear in x on its active
		// samples (a ReLU unit) looks like e^x − 1 with vanishing weights
		// and a huge output scale. Refuse that limit.
		return 0, nil, 0, fmt.Errorf("the activation is linear in x on its active samples (best scale s = %.1e·median r): a ReLU-like unit, not e^x − 1 with finite weights", 1/(a*med))
	}
	rho(b)
	hm := mat.NewDense(p, 1, append([]float64(nil), h...))
	sol, err := linalg.LstSq(XP, hm)
	if err != nil {
		return 0, nil, 0, err
	}
	return a, mat.Col(nil, 0, sol), math.Sqrt(cur / math.Max(dot(h, h), math.SmallestNonzeroFloat64)), nil
}

// expProjection holds expScale's variable projection: Q, an orthonormal
// basis of col(X_P), the active entries rP, and the buffers for
// h(e^b) = log(1 + e^b·r_P), its derivative and their projections.
type expProjection struct {
	Q           *mat.Dense
	rP          []float64
	h, dh, coef []float64
	res, resD   []float64
}

// project writes (I − QQᵀ)·v into out and returns its squared norm.
func (ep *expProjection) project(v, out []float64) float64 {
	Q, coef := ep.Q, ep.coef
	p := len(v)
	for j := range coef {
		coef[j] = 0
	}
	for q := 0; q < p; q++ {
		row := Q.RawRowView(q)
		for j, c := range row {
			coef[j] += c * v[q]
		}
	}
	ss := 0.0
	for q := 0; q < p; q++ {
		row := Q.RawRowView(q)
		s := v[q]
		for j, c := range row {
			s -= c * coef[j]
		}
		out[q] = s
		ss += s * s
	}
	return ss
}

// rho is ρ(b) = ‖(I − QQᵀ)·h(e^b)‖², leaving h(e^b) in h and its
// projection in res.
func (ep *expProjection) rho(b float64) float64 {
	a := math.Exp(b)
	for q, r := range ep.rP {
		ep.h[q] = math.Log1p(a * r)
	}
	return ep.project(ep.h, ep.res)
}

// gaussNewton runs Gauss–Newton on b from the grid's best b (derivative
// ∂h/∂b = a·r/(1 + a·r), projected), backtracking when a full step does
// not lower ρ, until the step is negligible. It returns b and ρ(b).
func (ep *expProjection) gaussNewton(b float64) (float64, float64) {
	cur := ep.rho(b)
	for it := 0; it < 100; it++ {
		a := math.Exp(b)
		for q, r := range ep.rP {
			ep.dh[q] = a * r / (1 + a*r)
		}
		ep.rho(b) // refresh res for the current b
		g := ep.project(ep.dh, ep.resD)
		if g == 0 {
			break
		}
		step := -dot(ep.resD, ep.res) / g
		// Backtrack if the full step does not lower ρ (far from the root
		// the Gauss–Newton model can overshoot).
		nb, nv := b+step, ep.rho(b+step)
		for tries := 0; nv > cur && tries < 30; tries++ {
			step /= 2
			nb, nv = b+step, ep.rho(b+step)
		}
		if nv > cur {
			break
		}
		b, cur = nb, nv
		if math.Abs(step) < 1e-15*math.Max(1, math.Abs(b)) {
			break
		}
	}
	return b, cur
}

// quickMedian returns the median of v (reordering v).
func quickMedian(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	idx := make([]int, len(v))
	sel := smallest(v, 1, len(v)/2+1, idx)
	return v[sel[len(sel)-1]]
}

// newDenseIn returns an r×c matrix backed by buf[:r·c] when buf has room
// for it, keeping whatever buf holds (the caller overwrites every entry),
// and a new zero matrix (makeLarge) otherwise.
func newDenseIn(buf []float64, r, c int) *mat.Dense {
	if len(buf) >= r*c {
		return mat.NewDense(r, c, buf[:r*c])
	}
	return mat.NewDense(r, c, makeLarge(r*c))
}

// largeBytes is the size from which makeLarge looks at the collector's
// goal before allocating (16 MiB: an n×k matrix of a big fit, not the
// per-chunk scratch).
const largeBytes = 16 << 20

// makeLarge returns a new zeroed slice of size floats, first running a
// collection when the buffer is at least largeBytes and would take the heap
// past the collector's goal. Under a soft memory limit (the CLI sets the
// data plus a quarter) the heap sits at that goal with short-lived garbage
// most of the time, and a large allocation is granted before the
// collection it triggers can free anything: the heap then overshoots the
// limit by the buffer's whole size (n = 1e6, k = 10: 76 MiB, the peak RSS
// of the fit; docs/files.md). Collected first, the garbage's pages are
// reused or returned to the OS by the scavenger. The collection marks
// little on a heap that is mostly pointer-free data (milliseconds), and it
// runs at most once per n×k matrix of a route.
func makeLarge(size int) []float64 {
	if bytes := uint64(size) * 8; bytes >= largeBytes {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[1].Value.Kind() == metrics.KindUint64 && s[1].Value.Uint64()+bytes > s[0].Value.Uint64() {
			runtime.GC()
		}
	}
	return make([]float64, size)
}
