package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/outer"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/tensor"
)

// exactRankTol is the relative singular value below which Y counts as exactly
// rank k (practical default, not in [BJW19]: σ_{k+1}/σ_1 < 1e-10 in the noiseless case).
const exactRankTol = 1e-10

// rankTolFor is the exact-rank tolerance for data of unit roundoff u
// (certify.RankTol; exactRankTol for float64 data).
func rankTolFor(u float64) float64 { return certify.RankTol(u) }

// Start is the output of TensorStart: approximate hidden weights, each row
// equal to ±(a true row) up to the moment estimation error, plus what the
// later routes reuse.
type Start struct {
	// V is k×d with unit rows in the raw input coordinates, signs unknown.
	V *mat.Dense
	// K is the hidden width used; Inferred says whether it came from the
	// numerical rank of Y.
	K        int
	Inferred bool
	// SingularValues of Y, descending.
	SingularValues []float64
	// ExactRank reports σ_{k+1}(Y)/σ_1(Y) < 1e-10 (always false when k = m,
	// where the rank cannot tell noise from signal).
	ExactRank bool
	// Basis is an n×k orthonormal basis of the top-k column span of Y — the
	// paper's k×n "basis R of rowspan(A)", transposed.
	Basis *mat.Dense
	// Order is the Hermite moment order used (4 for the ReLU).
	Order int
	// Whitened reports whether X was whitened (Remark 3); CondCov is κ(Σ̂).
	Whitened bool
	CondCov  float64
	// Jennrich's fit of the moment slices.
	JennrichResidual float64
	JennrichGap      float64
	JennrichTries    int
	Warnings         []string

	// Rows is how many samples the start read: for a tensor start the
	// first Rows (all n, or fewer for a quick start: startRows); for a
	// parity start the rows, spread evenly, its linear part was regressed
	// on (parityLinearRows).
	Rows int

	moments *startMoments
	// parity, for a parity start (parity.go), replaces moments.
	parity *parityEquations
	// zeroSet, for a zero-set start (zeroset.go), replaces moments.
	zeroSet *zeroSetSearch
	// productBasis records that basis() returned Y·V_k·Σ_k⁻¹ (not the
	// orthonormal left singular vectors).
	productBasis bool
	// work is the memory of an n×k matrix no longer in use (the reduced
	// outputs, once releaseMoments drops them), for the next n×k matrix
	// the exact route needs (the basis of col(Y)): one buffer instead of a
	// fresh 8·n·k bytes on top of the data, which would lift the heap
	// above the CLI's soft memory limit by that much (docs/files.md).
	work []float64
	// p and opt rebuild the moments (steps 1–3) when Resample finds them
	// released (releaseMoments).
	p   *problem
	opt Options
}

// TensorStart computes the tensor initializer of [BJW19, Alg 4] (Bakshi et al.
// Alg 4, corrected): it returns ±V* up to an angular error that falls like
// n^{-1/2}. Steps:
//
//  1. The top-k right singular vectors P of Y reduce the outputs to k
//     channels Y·P (in the noiseless case col(Y) = col(f(XVᵀ))).
//  2. If X's covariance is not the identity, X is whitened by Σ̂^{-1/2}
//     (Remark 3); the learned rows are mapped back at the end.
//  3. The span of the rows of V is the top-k left singular space of the
//     order-1 moment E[x·yᵀ]/c₁ stacked with order-2 moments E[s·(xxᵀ−I)]/c₂
//     for three random output combinations s (the paper uses order 2 only;
//     adding order 1 costs n·d·k and strengthens the span when c₁ ≠ 0).
//  4. In the k-dimensional projected coordinates z = Wᵀx, 2k slices of the
//     order-r Hermite moment (r = 4 for the ReLU, from hermite.TensorOrder;
//     the paper's r = 3 is identically zero) are decomposed by Jennrich.
//
// The Hermite coefficients c_1, c_2 and the order r come from
// Options.Activation (3 for x², x³ and e^x − 1; the table of [BJW19, App. 9.1]). For
// e^x − 1 the coefficients are those of unit-norm rows: a row of norm s has
// the coefficients of e^{s·x} − 1 instead, which changes the weights λ_j of
// the moments but not the directions they are decomposed into.
//
// Cost: one thin SVD of Y (n·m²), the order-2 step (2·n·d²·3), the order-r
// slices (2·n·k²·(2k+3)) and small k×k work.
func TensorStart(ctx context.Context, X, Y *mat.Dense, opt Options) (*Start, error) {
	opt = opt.withDefaults()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, err
	}
	st, err := tensorStart(ctx, p, opt)
	if err != nil {
		return nil, err
	}
	st.Basis, err = st.basis()
	return st, err
}

// tensorStart is TensorStart on a resolved problem, without Basis (see
// basis); opt has its defaults and was validated.
func tensorStart(ctx context.Context, p *problem, opt Options) (*Start, error) {
	return tensorStartRows(ctx, p, opt, p.n)
}

// tensorStartRows is tensorStart on the moments of the first rows samples
// (rows ≤ n); the SVD of Y, the width and the rank checks are the whole
// data's.
func tensorStartRows(ctx context.Context, p *problem, opt Options, rows int) (*Start, error) {
	rng := rand.New(rand.NewPCG(opt.Seed, 0x5eed_7e45))
	st := &Start{p: p, opt: opt, Rows: rows}
	if err := st.buildMoments(ctx, rng); err != nil {
		return nil, err
	}
	if err := st.decompose(ctx, rng, opt); err != nil {
		return nil, err
	}
	return st, nil
}

// basis returns Basis, computing it from the SVD of Y when it is not set,
// into the start's spare n×k buffer when it has one (work): U's first k
// columns as Y·V_k·Σ_k⁻¹ (one product of Y with an m×k matrix), or, when
// σ_1/σ_k > basisCondMax, from the SVD's QR (one pass over Y refactorising
// its blocks, several times the work).
//
// Both are as accurate as the SVD itself: a backward-stable SVD determines
// the top-k left singular space of an exactly rank-k Y only to an angle
// ε·σ_1/σ_k (Wedin), and the rounding of Y·V_k moves its span by the same
// order (V_k's error in Y's null directions is multiplied by zero singular
// values). The polish needs the span, and its rows' certificates and the
// route's residual certificate check the result either way.
func (st *Start) basis() (*mat.Dense, error) {
	if st.Basis != nil {
		return st.Basis, nil
	}
	svd, err := st.p.svdY()
	if err != nil {
		return nil, fmt.Errorf("twolayer: SVD of Y: %w", err)
	}
	work := st.work
	st.work = nil
	n, m, k := st.p.n, st.p.m, st.K
	if len(work) < n*k {
		work = makeLarge(n * k)
	}
	if k < 1 || len(svd.S) < k || !(svd.S[k-1] > 0) || svd.S[0] > basisCondMax*svd.S[k-1] {
		return svd.UColsTo(work, k), nil
	}
	P := mat.NewDense(m, k, nil) // V_k·Σ_k⁻¹
	for l := 0; l < m; l++ {
		for i := 0; i < k; i++ {
			P.Set(l, i, svd.V.At(l, i)/svd.S[i])
		}
	}
	B := mat.NewDense(n, k, work[:n*k])
	mulRowsPar(B, st.p.Y, P)
	st.productBasis = true
	return B, nil
}

// basisCondMax is the largest σ_1/σ_k of Y for which basis takes the
// product Y·V_k·Σ_k⁻¹.
const basisCondMax = 1e6

// releaseMoments drops the start's n×k moment data (the projected inputs
// and residualised outputs) once the caller holds the rows it needs, so
// that the polish and the output fit do not carry them; a later Resample
// rebuilds them (steps 1–3 again, the same bits). The residualised
// outputs' memory becomes the start's spare buffer (work).
func (st *Start) releaseMoments() {
	if st.moments != nil && st.moments.red != nil {
		st.work = st.moments.red.RawMatrix().Data
	}
	st.moments = nil
}

// buildMoments is steps 1–3 of TensorStart: it sets the start's sizes and
// checks and st.moments, drawing the order-2 channels from rng.
func (st *Start) buildMoments(ctx context.Context, rng *rand.Rand) error {
	p, opt := st.p, st.opt
	X, Y, n, d, m := p.X, p.Y, p.n, p.d, p.m
	if st.Rows > 0 && st.Rows < n {
		n = st.Rows
		X, Y = X.Slice(0, n, 0, d).(*mat.Dense), Y.Slice(0, n, 0, m).(*mat.Dense)
	}
	act := hermiteActivation(opt.Activation)

	// 1. Rank and output reduction.
	red0, err := reduceOutputs(p, opt.Hidden, "the tensor start", tensorFloor)
	if err != nil {
		return err
	}
	vY, k := red0.V, red0.K
	st.SingularValues, st.Warnings, st.Inferred = red0.S, red0.Warnings, red0.Inferred
	st.K, st.ExactRank = k, red0.ExactRank
	red := newDenseIn(nil, n, k)
	mulRowsPar(red, Y, vY.Slice(0, m, 0, k).(*mat.Dense))

	// 2. Whitening (Remark 3).
	Xw, unwhiten, err := whiten(ctx, X, opt.Whiten, st)
	if err != nil {
		return err
	}

	// 3. Span of the hidden weights from the order-1 and order-2 moments.
	span, err := st.weightSpan(ctx, Xw, red, act, rng)
	if err != nil {
		return err
	}

	// 4. Order-r slices in k dimensions. Every slice gets its own output
	// combination s = red·θ, so no unit is weak in all of them (a unit j
	// has weight λ_j ∝ θ·ũ_j in a slice; with a few shared θ an unlucky unit
	// can be nearly invisible).
	order, err := hermite.TensorOrder(act)
	if err != nil {
		return err
	}
	st.Order = order
	// The projected inputs Z = Xw·span (n×k) are held when they are small
	// next to X and Y (holdZ); otherwise every pass computes its chunk's
	// rows (zRows). Either way the same kernel gives the same bits.
	mo := &startMoments{xw: Xw, red: red, span: span, unwhiten: unwhiten}
	if holdZ(n, k, p) {
		z := newDenseIn(nil, n, k)
		mulRowsPar(z, Xw, span)
		mo.z = z
	}
	// The first moment E[red·zᵀ] of the unresidualised red is read off the
	// first pass of its residualisation (the features include z). The
	// residualisation's last step (red −= F·β, in place: no second n×k
	// copy) is left to the first slice pass (mo.pending), which computes
	// each chunk's z anyway.
	if order < 3 {
		return fmt.Errorf("twolayer: tensor order %d < 3", order)
	}
	first, rz, err := residualizeHermiteSums(ctx, n, k, mo.zRows, red, order-2)
	if err != nil {
		return err
	}
	f := rz.f
	M1z := mat.NewDense(k, k, nil)
	for t := 0; t < k; t++ {
		copy(M1z.RawRowView(t), first[t*f+1:t*f+1+k])
	}
	mo.m1z = M1z
	mo.pending = rz
	st.moments = mo
	return nil
}

// weightSpan is step 3 of TensorStart: the span of the hidden weights
// (d×k, in the whitened coordinates of Xw) from the order-1 moment
// E[x·redᵀ] and the order-2 Hermite moments of three random output
// combinations s = red·θ (θ drawn from rng), each divided by the
// activation's Hermite coefficient.
func (st *Start) weightSpan(ctx context.Context, Xw, red *mat.Dense, act hermite.Activation, rng *rand.Rand) (*mat.Dense, error) {
	opt := st.opt
	n, d := Xw.Dims()
	_, k := red.Dims()
	const channels = 3
	S := mat.NewDense(n, channels, nil)
	theta := mat.NewDense(k, channels, nil)
	for i := range theta.RawMatrix().Data {
		theta.RawMatrix().Data[i] = rng.NormFloat64()
	}
	mulRowsPar(S, red, theta)
	var blocks []mat.Matrix
	// Residualising the weights on [1, x] (a degree-1 polynomial) leaves the
	// order-2 Hermite moment's expectation unchanged (He_2 is orthogonal to
	// it) and removes most of its variance: the ReLU is half linear.
	S2 := S // S is not read again: residualised in place
	if err := residualizeHermite(ctx, n, d, func(lo, hi int, _ *[]float64) blas64.General { return rowsOf(Xw, lo, hi) }, S2, 1); err != nil {
		return nil, err
	}
	if c1 := act.Coeff(1); math.Abs(c1) > 1e-8 {
		sum, err := groupSums(ctx, n, d*k, func(_ int, acc []float64, lo, hi int) {
			outer.Add(acc, rowsOf(Xw, lo, hi), rowsOf(red, lo, hi))
		})
		if err != nil {
			return nil, err
		}
		M1 := mat.NewDense(d, k, sum)
		M1.Scale(1/(float64(n)*c1), M1)
		blocks = append(blocks, M1)
	}
	if c2 := act.Coeff(2); math.Abs(c2) > 1e-8 {
		M2, err := hermiteMoment2(ctx, Xw, S2, func(done, total int) { opt.progress("order-2 moment", done, total) })
		if err != nil {
			return nil, err
		}
		for _, M := range M2 {
			var s mat.Dense
			s.Scale(1/c2, M)
			blocks = append(blocks, &s)
		}
	}
	span, _, _, err := linalg.TopK(hstack(blocks), k)
	if err != nil {
		return nil, fmt.Errorf("twolayer: span of the hidden weights: %w", err)
	}
	return span, nil
}

// holdZFraction bounds the projected inputs the tensor start holds: Z
// (rows×k) is computed once and kept for the five passes that read it
// (two of the residualisation, three of the slices) when rows·k ≤
// n·(d+m)/holdZFraction, i.e. when it adds at most ~17% of X and Y to the
// start's memory; otherwise each pass recomputes its chunk's rows
// (rows·d·k multiply-adds a pass). At d=100, k=20, m=50, n=2e5 it is held
// (32 MB for 240 MB of data, 0.2 s of CPU less; peak RSS 310 → 328 MB);
// at n=1e6, d=50, k=10, m=20 the quick start reads 8·10⁴ rows (6.4 MB);
// at k=m=50 (Z a third of the data) it is not.
const holdZFraction = 6

// holdZ reports whether the tensor start on rows samples of p holds Z.
func holdZ(rows, k int, p *problem) bool {
	return rows*k*holdZFraction <= p.n*(p.d+p.m)
}

// name describes the start in messages.
func (st *Start) name() string {
	switch {
	case st.parity != nil:
		return fmt.Sprintf("parity start (linear part from %d samples)", st.Rows)
	case st.zeroSet != nil:
		return fmt.Sprintf("zero-set start (%d samples)", st.Rows)
	case st.Rows < st.p.n:
		return fmt.Sprintf("tensor start from the first %d samples", st.Rows)
	}
	return fmt.Sprintf("tensor start from all %d samples", st.Rows)
}

// k is the width of the projected inputs.
func (mo *startMoments) k() int {
	if mo.z != nil {
		_, k := mo.z.Dims()
		return k
	}
	_, k := mo.span.Dims()
	return k
}

// zRows returns rows lo..hi of the projected inputs Z = Xw·span: a view of
// z when it is held, else the product of those rows of Xw with span,
// computed into *buf (grown as needed) by internal/kern.MulRows, which sums
// each entry over the d inputs in order: every chunk is bit for bit the
// rows of the whole product, and a pass over Z costs n·d·k multiply-adds
// at AVX2 speed (faster than gonum's GEMM on these narrow products, and Z
// is recomputed by every pass rather than held: 8·n·k bytes).
func (mo *startMoments) zRows(lo, hi int, buf *[]float64) blas64.General {
	if mo.z != nil {
		return rowsOf(mo.z, lo, hi)
	}
	k := mo.k()
	if cap(*buf) < (hi-lo)*k {
		*buf = make([]float64, (hi-lo)*k)
	}
	out := blas64.General{Rows: hi - lo, Cols: k, Stride: k, Data: (*buf)[:(hi-lo)*k]}
	x, sp := rowsOf(mo.xw, lo, hi), mo.span.RawMatrix()
	kern.MulRows(out.Data, k, x.Data, x.Stride, sp.Data, sp.Stride, hi-lo, sp.Rows, k)
	return out
}

// startMoments is what the order-r decomposition needs from the earlier
// steps; keeping it lets Resample try fresh random contractions cheaply.
type startMoments struct {
	z        *mat.Dense // n×k projected (whitened) inputs, or nil: computed from xw and span (zRows)
	xw       *mat.Dense // n×d (whitened) inputs
	red      *mat.Dense // n×k reduced outputs, residualised for order r
	m1z      *mat.Dense // k×k first moment E[red·zᵀ] (unresidualised)
	span     *mat.Dense // d×k basis of the span of V (whitened coordinates)
	unwhiten *mat.Dense // Σ̂^{-1/2}, or nil
	// base holds the channel sums E[red_c·[1, z_a·z_b, z]] (k rows) that
	// every slice pass combines (hermiteSlices); set by the first pass.
	base []float64
	// pending, until the first slice pass applies it to red chunk by
	// chunk, is red's residualisation's last step.
	pending *residualizer
}

// Resample decomposes the same moments again with fresh random contractions
// drawn from seed and returns the new start rows (k×d, unit, signs unknown).
// The decomposition is the only randomised step, so a retry costs only the
// order-r slice passes, not the SVD, whitening or span steps.
func (st *Start) Resample(ctx context.Context, seed uint64, opt Options) (*mat.Dense, error) {
	if st.zeroSet != nil {
		// The search goes on from the units it found, with fresh starts.
		if err := st.searchZeroSets(ctx, rand.New(rand.NewPCG(seed, 0x2e50_5e75)), st.p.roundoff); err != nil {
			return nil, err
		}
		return st.V, nil
	}
	if st.parity != nil {
		again := *st
		if err := again.decomposeParity(rand.New(rand.NewPCG(seed, 0x5eed_7e45))); err != nil {
			return nil, err
		}
		return again.V, nil
	}
	if st.moments == nil {
		// Released after the first polish: rebuild steps 1–3 from the same
		// seed, which gives the same moments bit for bit.
		re := &Start{p: st.p, opt: st.opt, Rows: st.Rows}
		if err := re.buildMoments(ctx, rand.New(rand.NewPCG(st.opt.Seed, 0x5eed_7e45))); err != nil {
			return nil, err
		}
		st.moments = re.moments
	}
	again := *st
	if err := again.decompose(ctx, rand.New(rand.NewPCG(seed, 0x5eed_7e45)), opt.withDefaults()); err != nil {
		return nil, err
	}
	return again.V, nil
}

// decompose is step 4 of TensorStart: order-r slices, Jennrich, aligned
// passes, and the lift back to d dimensions. It sets st.V.
func (st *Start) decompose(ctx context.Context, rng *rand.Rand, opt Options) error {
	mo, k, order := st.moments, st.K, st.Order
	M1z := mo.m1z
	nslices := max(2*k, 6)
	thetas := mat.NewDense(k, nslices, nil)
	cs := make([]tensor.Contraction, nslices)
	for i := range cs {
		thetas.SetCol(i, randUnit(k, rng))
		cs[i] = contraction(order, i, randUnit(k, rng), randUnit(k, rng))
	}
	slices, err := mo.hermiteSlices(ctx, thetas, cs, opt.stage(fmt.Sprintf("order-%d moment", order)))
	if err != nil {
		return err
	}
	dec, err := tensor.Jennrich(slices, rng, tensor.JennrichOptions{})
	if err != nil {
		return fmt.Errorf("twolayer: tensor decomposition: %w", err)
	}
	st.JennrichGap, st.JennrichTries = dec.MinGap, dec.Tries

	// Aligned passes. Slice j contracts with the current component w_j and
	// weighs the outputs by θ_j ∝ ±ũ_j, read off the first moment
	// E[red·zᵀ] = c₁·Ũ·Wᵀ: both choices make component j dominate slice j
	// (signal ~1 instead of ~1/k) at the same sampling noise. In each pass
	// the components come from whichever fits the new slices better: a joint
	// diagonalisation started from the previous components, or a fresh
	// Jennrich (which separates components the noisy first pass left mixed).
	W := dec.W
	for pass := 1; pass <= 2; pass++ {
		var ut mat.Dense // rows ∝ ±ũ_j
		if err := ut.Solve(W, M1z.T()); err != nil {
			break
		}
		for j := 0; j < k; j++ {
			col := mat.Row(nil, j, &ut)
			vec.Normalize(col)
			thetas.SetCol(j, col)
			w := mat.Col(nil, j, W)
			cs[j] = contraction(order, j, w, w)
		}
		slices, err = mo.hermiteSlices(ctx, thetas.Slice(0, k, 0, k).(*mat.Dense), cs[:k], opt.stage(fmt.Sprintf("order-%d moment, aligned pass %d", order, pass)))
		if err != nil {
			return err
		}
		dec = tensor.JointDiagonalize(slices, W, 0)
		if fresh, err := tensor.Jennrich(slices, rng, tensor.JennrichOptions{}); err == nil && fresh.Residual < dec.Residual {
			dec = fresh
		}
		W = dec.W
	}
	st.JennrichResidual = dec.Residual

	// Lift back: v_j = Σ̂^{-1/2}·W_sub·w_j, normalised.
	d, _ := mo.span.Dims()
	V := mat.NewDense(k, d, nil)
	var lifted mat.Dense
	lifted.Mul(mo.span, dec.W) // d×k, columns in whitened coordinates
	if mo.unwhiten != nil {
		lifted.Mul(mo.unwhiten, mat.DenseCopyOf(&lifted))
	}
	V.Copy(lifted.T())
	normalizeRows(V)
	st.V = V
	return nil
}

// inferHidden picks k from the singular values of the n×m matrix Y:
//
//   - the exact numerical rank when σ_{r+1}/σ_1 < 1e-10 for some r < m
//     (noiseless data);
//   - otherwise the count above a noise floor: i.i.d. noise adds m singular
//     values that all lie within a factor 1 ± √(m/n) of each other
//     (Marchenko–Pastur), so the values within 1 + 4√(m/n) of the smallest
//     are taken as noise when there are at least two of them;
//   - otherwise m (no visible floor), with a warning.
func inferHidden(s []float64, d, n int, rankTol float64) (int, []string) {
	m := len(s)
	if r := linalg.NumericalRank(s, rankTol); r < m {
		return min(max(r, 1), d), nil
	}
	floor := s[m-1] * (1 + 4*math.Sqrt(float64(m)/float64(n)))
	noise := 0
	for _, v := range s {
		if v <= floor {
			noise++
		}
	}
	if noise >= 2 && noise < m {
		k := m - noise
		return min(k, d), []string{fmt.Sprintf("hidden width inferred as %d: Y is not exactly low rank (noise), and %d of its singular values form a noise floor; pass the width explicitly if you know it", k, noise)}
	}
	return min(m, d), []string{fmt.Sprintf("hidden width inferred as m = %d: Y has full rank and no visible noise floor; pass the width explicitly if you know it", m)}
}

// whiten returns X·Σ̂^{-1/2} and Σ̂^{-1/2} when mode asks for it (or, in
// "auto", when the sample covariance differs from I by more than three times
// its expected sampling error 2√(d/n) + d/n in spectral norm); otherwise X and nil.
func whiten(ctx context.Context, X *mat.Dense, mode Whiten, st *Start) (*mat.Dense, *mat.Dense, error) {
	n, d := X.Dims()
	if mode == "never" {
		return X, nil, nil
	}
	cov, err := symOuter(ctx, X, 1/float64(n))
	if err != nil {
		return nil, nil, err
	}
	if mode == "auto" {
		var eig mat.EigenSym
		if !eig.Factorize(cov, false) {
			return nil, nil, fmt.Errorf("twolayer: eigenvalues of the input covariance did not converge")
		}
		dev := 0.0
		for _, l := range eig.Values(nil) {
			dev = math.Max(dev, math.Abs(l-1))
		}
		ratio := float64(d) / float64(n)
		if dev <= 3*(2*math.Sqrt(ratio)+ratio) {
			return X, nil, nil
		}
	}
	inv, cond, err := linalg.SymInvSqrt(cov)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the input covariance is singular, so the inputs do not span R^d (%v); drop constant or duplicated input columns", ErrInput, err)
	}
	Xw := mat.NewDense(n, d, nil)
	Xw.Mul(X, inv)
	st.Whitened, st.CondCov = true, cond
	return Xw, inv, nil
}

// stage is the progress callback of one named stage.
func (o Options) stage(name string) func(done, total int) {
	return func(done, total int) { o.progress(name, done, total) }
}

func contraction(order, channel int, alpha, beta []float64) tensor.Contraction {
	c := tensor.Contraction{Channel: channel, Alpha: alpha}
	if order == 4 {
		c.Beta = beta
	}
	return c
}

func hstack(ms []mat.Matrix) *mat.Dense {
	r, _ := ms[0].Dims()
	cols := 0
	for _, m := range ms {
		_, c := m.Dims()
		cols += c
	}
	out := mat.NewDense(r, cols, nil)
	at := 0
	for _, m := range ms {
		_, c := m.Dims()
		out.Slice(0, r, at, at+c).(*mat.Dense).Copy(m)
		at += c
	}
	return out
}

func randUnit(k int, rng *rand.Rand) []float64 {
	v := make([]float64, k)
	s := 0.0
	for i := range v {
		v[i] = rng.NormFloat64()
		s += v[i] * v[i]
	}
	for i := range v {
		v[i] /= math.Sqrt(s)
	}
	return v
}

// normalizeRows scales every non-zero row of V to unit Euclidean norm.
func normalizeRows(V *mat.Dense) {
	r, _ := V.Dims()
	for i := 0; i < r; i++ {
		row := V.RawRowView(i)
		s := 0.0
		for _, v := range row {
			s += v * v
		}
		if s > 0 {
			s = 1 / math.Sqrt(s)
			for j := range row {
				row[j] *= s
			}
		}
	}
}

// outputReduction is the SVD of Y and the hidden width k that the routes
// needing U* of full column rank (tensor start, ICA) share.
type outputReduction struct {
	svd       *linalg.TallSVD
	V         *mat.Dense // right singular vectors of Y (m×m')
	S         []float64  // singular values, descending
	K         int
	Inferred  bool
	ExactRank bool // σ_{k+1}/σ_1 < 1e-10 (false when k = m)
	Warnings  []string
}

// reduceOutputs computes the SVD of Y, takes k from hidden or infers it from
// the singular values, and checks what route (named in messages) needs:
// k ≤ min(d, m), n above the sample floor, and rank(Y) ≥ k.
func reduceOutputs(p *problem, hidden int, route string, floor sampleFloor) (*outputReduction, error) {
	n, d, m := p.n, p.d, p.m
	svd, err := p.svdY()
	if err != nil {
		return nil, fmt.Errorf("twolayer: SVD of Y: %w", err)
	}
	sY, vY := svd.S, svd.V
	r := &outputReduction{svd: svd, V: vY, S: sY, K: hidden}
	if r.K == 0 {
		r.K, r.Warnings = inferHidden(sY, d, n, p.rankTol)
		r.Inferred = true
	}
	k := r.K
	if k > min(d, m) {
		return nil, errs.Options(ErrInput, fmt.Sprintf("%d hidden units cannot be identified by %s from d=%d inputs and m=%d outputs: it needs k ≤ min(d, m) (V* and U* of full rank k); for m < k set ", k, route, d, m),
			errs.Option{Struct: "Options", Field: "Route", Value: string(UseFPT)}, ", or use the depth-2 learner (package depth2; it learns any width from one output, with biases)")
	}
	if need := floor.need(d, k); n < need {
		return nil, fmt.Errorf("%w: %s needs n ≥ %s = %d samples for d=%d, k=%d; got %d", ErrInput, route, floor.rule, need, d, k, n)
	}
	if rk := linalg.NumericalRank(sY, p.rankTol); rk < k {
		return nil, errs.Options(ErrInput, fmt.Sprintf("Y has numerical rank %d < k = %d, so U* cannot have full column rank k as %s needs; set ", rk, k, route),
			errs.Option{Struct: "Options", Field: "Hidden", Value: strconv.Itoa(rk)}, ", or use the FPT route for rank-deficient U*")
	}
	r.ExactRank = k < m && sY[k] <= p.rankTol*sY[0]
	return r, nil
}

// mulRowsPar sets out (n×c) to a·b for a n×m and b m×c by
// internal/kern.MulRows over chunks of rows in parallel: every entry is the
// in-order sum gonum's GEMM takes for these shapes (row times matrix, a
// multiply and an add per term), so the bits do not depend on the chunks or
// on GOMAXPROCS, without gonum's pure-Go kernels on tall, narrow products.
func mulRowsPar(out, a, b *mat.Dense) {
	n, m := a.Dims()
	_, c := b.Dims()
	o, ar, br := out.RawMatrix(), a.RawMatrix(), b.RawMatrix()
	chunks := (n + linalg.GramChunk - 1) / linalg.GramChunk
	parallel.For(chunks, func(_, i int) {
		lo, hi := i*linalg.GramChunk, min(n, (i+1)*linalg.GramChunk)
		kern.MulRows(o.Data[lo*o.Stride:], o.Stride, ar.Data[lo*ar.Stride:], ar.Stride, br.Data, br.Stride, hi-lo, m, c)
	})
}
