package compress

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// Route is a route of Alg 2 (LayerOptions.Route).
type Route string

// Routes of Alg 2: three ways to compute the closed form in the proof of
// [ZS25, Theorem 3.1]. All give the same M̂ on well-conditioned data; they
// differ in cost, memory and accuracy.
const (
	// RouteQR whitens with the R factor of a Householder QR of the inputs
	// (form F2): M̂ = R⁻¹[QᵀỸ]_r. κ(R) = κ(X̌), never squared. Costs about
	// 2md² + 4mdd2 flops and holds the m×d inputs.
	RouteQR Route = "qr"
	// RouteGram whitens with the Cholesky factor of the Gram matrix
	// H = X̌ᵀX̌ (forms F2/F3 from sufficient statistics): M̂ = R⁻¹[R⁻ᵀX̌ᵀỸ]_r.
	// Costs md² + 2mdd2 flops, and with GramStats it streams: memory
	// O(d² + d·d2) whatever m. κ(H) = κ(X̌)², so it needs a ridge sooner.
	RouteGram Route = "gram"
	// RouteProjection is form F1, M̂ = X̌⁺[P_X̌Ỹ]_r with the pseudo-inverse
	// from an SVD of X̌: valid for rank-deficient X̌ without any ridge (the
	// minimum-norm solution), at the price of an SVD of the inputs.
	RouteProjection Route = "projection"
	// RouteAuto (default) picks RouteQR for data held in memory (safer and,
	// measured, faster); RouteGram serves streamed statistics.
	RouteAuto Route = "auto"
)

// Whitening thresholds: beyond these condition numbers the whitening matrix
// is treated as numerically singular and a ridge is added.
const (
	maxCondR = 1e10 // κ(R) for the QR route: errors grow like κ·ε ≈ 2e-6
	maxCondH = 1e12 // κ(H) = κ(R)² for the Gram route
)

// ridgeLadder are the relative ridges tried, in order, when the whitening
// matrix is numerically singular and the caller asked for no ridge.
var ridgeLadder = []float64{1e-10, 1e-8, 1e-6, 1e-4, 1e-2}

// Whitening reports how the inputs were whitened: evidence for the numerical
// safety of a data-driven fit.
type Whitening struct {
	// Route is the route actually used (RouteQR, RouteGram or
	// RouteProjection).
	Route Route `json:"route"`
	// Ridge is the absolute ridge λ added to X̌ᵀX̌ (0 when none), and
	// RelRidge = λ / mean(diag X̌ᵀX̌): the problem solved is then ridge
	// regression, min ‖Ỹ − X̌Z‖² + λ‖Z‖², with the rank constraint.
	Ridge    float64 `json:"ridge"`
	RelRidge float64 `json:"rel_ridge"`
	// Cond is the (estimated, 1-norm) condition number of the whitening
	// matrix R (κ(X̌) for qr, κ(H) for gram) after the ridge, or
	// s_max/s_min over the kept singular values for projection.
	Cond float64 `json:"cond"`
	// Rank is the numerical rank of X̌ used by the projection route and
	// SVD-LLM V2 (the number of columns whitened otherwise: all but
	// Dropped).
	Rank int `json:"rank"`
	// Dropped counts the inputs that are numerically zero on every
	// calibration row (dead ReLU units; constant inputs once centred): they
	// were left out of the whitening and their weights are 0.
	Dropped int `json:"dropped,omitempty"`
	// Note says why a ridge or a fallback was needed ("" when not); it is
	// also a layer warning only when the user can act on it (fewer
	// calibration rows than inputs).
	Note string `json:"note,omitempty"`
}

// whitened is a whitened least-squares problem: b0 = the target in whitened
// coordinates (so that ‖Ỹ − X̌Z‖² = ‖b0 − S·Z‖² + const with S the whitening
// matrix), and unwhiten(x) = S⁻¹·x maps whitened coordinates back to weights.
type whitened struct {
	Whitening
	b0       *mat.Dense
	unwhiten func(x *mat.Dense) *mat.Dense
	// warn marks a Note the user can act on: fewer calibration rows than
	// inputs (give more). A singular Gram matrix is noted only: the ridge
	// or the minimum-norm solution handles inputs that lie in a subspace
	// by construction, such as a LayerNorm's outputs (their features sum to
	// a constant) or duplicated features.
	warn bool
}

// whitenInput is what whiten needs: either the data (z, t) or its
// sufficient statistics (h = zᵀz, c = zᵀt).
type whitenInput struct {
	z, t *mat.Dense    // m×p inputs and m×d2 target (qr, projection; gram computes h, c from them if nil)
	h    *mat.SymDense // p×p, zᵀz
	c    *mat.Dense    // p×d2, zᵀt
	waug *mat.Dense    // if non-nil, t = z·waug exactly
}

// whiten reduces min_Z ‖t − z·Z‖_F (ridge-regularised if relRidge > 0) to
// coordinates where the inputs are orthonormal.
//
// Input columns that are numerically zero on every calibration row — ReLU
// units that never fire there, or (centred) constant inputs — are left out
// first, and their rows of every solution are 0: the data say nothing about
// them, so 0 is the minimum-norm choice, which a ridge would only
// approximate, and the whitening of the other inputs stays unregularised.
// Whitening.Dropped counts them.
func whiten(in whitenInput, route Route, relRidge float64) (*whitened, error) {
	live, p := liveColumns(in)
	if len(live) == p || len(live) == 0 { // nothing to drop, or nothing left (reported by the route)
		return whitenRoute(in, route, relRidge)
	}
	w, err := whitenRoute(in.restrict(live), route, relRidge)
	if err != nil {
		return nil, err
	}
	w.Dropped = p - len(live)
	inner := w.unwhiten
	w.unwhiten = func(x *mat.Dense) *mat.Dense {
		sub := inner(x)
		_, c := sub.Dims()
		out := mat.NewDense(p, c, nil)
		for i, j := range live {
			copy(out.RawRowView(j), sub.RawRowView(i))
		}
		return out
	}
	return w, nil
}

// liveColumns returns the indices of the columns of the inputs (z, or the
// diagonal of h) whose norm exceeds 1/maxCondR of the largest one, and the
// number of columns. A column below that makes every whitening route's
// condition number exceed its limit on its own: it is numerically zero.
func liveColumns(in whitenInput) ([]int, int) {
	var diag []float64
	if in.z != nil {
		diag = colSquares(in.z)
	} else {
		diag = make([]float64, in.h.SymmetricDim())
		for i := range diag {
			diag[i] = in.h.At(i, i)
		}
	}
	tol := floats.Max(diag) / (maxCondR * maxCondR)
	var live []int
	for j, v := range diag {
		if v > tol {
			live = append(live, j)
		}
	}
	return live, len(diag)
}

// restrict is the problem on the input columns cols only (whose solution
// rows are those of cols).
func (in whitenInput) restrict(cols []int) whitenInput {
	var out whitenInput
	out.t = in.t
	if in.z != nil {
		m, _ := in.z.Dims()
		out.z = mat.NewDense(m, len(cols), nil)
		for i := 0; i < m; i++ {
			row, dst := in.z.RawRowView(i), out.z.RawRowView(i)
			for k, j := range cols {
				dst[k] = row[j]
			}
		}
	}
	if in.h != nil {
		out.h = mat.NewSymDense(len(cols), nil)
		for a, i := range cols {
			for b := a; b < len(cols); b++ {
				out.h.SetSym(a, b, in.h.At(i, cols[b]))
			}
		}
	}
	out.c, out.waug = rowsOf(in.c, cols), rowsOf(in.waug, cols)
	return out
}

// rowsOf returns the rows rows of a (nil for nil).
func rowsOf(a *mat.Dense, rows []int) *mat.Dense {
	if a == nil {
		return nil
	}
	_, c := a.Dims()
	out := mat.NewDense(len(rows), c, nil)
	for k, i := range rows {
		copy(out.RawRowView(k), a.RawRowView(i))
	}
	return out
}

// whitenRoute is whiten on every column, by route.
func whitenRoute(in whitenInput, route Route, relRidge float64) (*whitened, error) {
	switch route {
	case RouteQR:
		return whitenQR(in.z, in.t, in.waug, relRidge)
	case RouteGram:
		h, c := in.h, in.c
		if h == nil {
			h = gram(in.z)
		}
		if c == nil && in.waug != nil {
			var hw mat.Dense
			hw.Mul(h, in.waug)
			c = &hw
		}
		if c == nil {
			c = mulTN(in.z, in.t)
		}
		return whitenGram(h, c, relRidge)
	case RouteProjection:
		return whitenProjection(in.z, in.t)
	}
	return nil, fmt.Errorf("compress: unknown route %q (expected qr, gram, projection or auto): %w", route, ErrInput)
}

// meanDiagZ is tr(zᵀz)/p = ‖z‖_F²/p, the scale a relative ridge refers to.
func meanDiagZ(z *mat.Dense) float64 {
	_, p := z.Dims()
	f := mat.Norm(z, 2)
	return f * f / float64(p)
}

func whitenQR(z, t, waug *mat.Dense, relRidge float64) (*whitened, error) {
	m, p := z.Dims()
	scale := meanDiagZ(z)
	if scale == 0 {
		return nil, fmt.Errorf("compress: the calibration inputs of this layer are all zero: %w", ErrInput)
	}
	try := func(rel float64) (*whitened, error) {
		zz, tt := z, t
		lam := rel * scale
		if lam > 0 || m < p {
			// Ridge regression as a plain least-squares problem:
			// [z; √λ I] Z ≈ [t; 0]. Also used when m < p (λ from the ladder).
			zz = mat.NewDense(m+p, p, nil)
			zz.Slice(0, m, 0, p).(*mat.Dense).Copy(z)
			sl := math.Sqrt(lam)
			for i := 0; i < p; i++ {
				zz.Set(m+i, i, sl)
			}
			if waug == nil {
				_, d2 := t.Dims()
				tt = mat.NewDense(m+p, d2, nil)
				tt.Slice(0, m, 0, d2).(*mat.Dense).Copy(t)
			}
		}
		qr, err := linalg.NewQR(zz)
		if err != nil {
			return nil, fmt.Errorf("compress: QR whitening: %w", err)
		}
		r := qr.R()
		cond := triCond(r)
		w := &whitened{Whitening: Whitening{Route: RouteQR, Ridge: lam, RelRidge: rel, Cond: cond, Rank: p}}
		if !(cond <= maxCondR) {
			return w, nil // caller checks Cond
		}
		if waug != nil {
			// t = z·waug, so Qᵀ[t; 0] = Qᵀ[z; √λI]·waug − Qᵀ[0; √λI]·waug
			// = R·waug − λ·R⁻ᵀ·waug.
			var b0 mat.Dense
			b0.Mul(r, waug)
			if lam > 0 {
				corr := mat.DenseCopyOf(waug)
				raw := r.RawMatrix()
				blas64.Trsm(blas.Left, blas.Trans, lam,
					blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: p, Stride: raw.Stride, Data: raw.Data}, corr.RawMatrix())
				b0.Sub(&b0, corr)
			}
			w.b0 = &b0
		} else {
			b0, err := qr.ApplyQT(tt)
			if err != nil {
				return nil, err
			}
			w.b0 = b0
		}
		w.unwhiten = func(x *mat.Dense) *mat.Dense { return solveUpper(r, x) }
		return w, nil
	}
	return withRidgeLadder(relRidge, maxCondR, m < p, try)
}

// colSquares returns the sum of squares of each column of z (the diagonal
// of zᵀz).
func colSquares(z *mat.Dense) []float64 {
	m, p := z.Dims()
	out := make([]float64, p)
	for i := 0; i < m; i++ {
		for j, v := range z.RawRowView(i)[:p] {
			out[j] += v * v
		}
	}
	return out
}

// withRidgeLadder runs try with relRidge; if the result is numerically
// singular (Cond above limit, or forced), it retries with the ladder's
// ridges above relRidge and notes why.
func withRidgeLadder(relRidge, limit float64, needRidge bool, try func(rel float64) (*whitened, error)) (*whitened, error) {
	var first *whitened
	if !needRidge || relRidge > 0 {
		w, err := try(relRidge)
		if err != nil {
			return nil, err
		}
		if w.Cond <= limit && w.b0 != nil {
			return w, nil
		}
		first = w
	}
	for _, rel := range ridgeLadder {
		if rel <= relRidge {
			continue
		}
		w, err := try(rel)
		if err != nil {
			return nil, err
		}
		if w.Cond <= limit && w.b0 != nil {
			if first != nil {
				w.Note = fmt.Sprintf("whitening matrix numerically singular (condition %.3g > %.0e) with relative ridge %g; used %g", first.Cond, limit, relRidge, rel)
			} else {
				w.Note = fmt.Sprintf("fewer calibration rows than inputs; used relative ridge %g", rel)
				w.warn = true
			}
			return w, nil
		}
	}
	return nil, fmt.Errorf("compress: whitening failed: the calibration inputs are singular even with a relative ridge of %g; use route %q: %w", ridgeLadder[len(ridgeLadder)-1], RouteProjection, ErrInput)
}

func whitenGram(h *mat.SymDense, c *mat.Dense, relRidge float64) (*whitened, error) {
	p := h.SymmetricDim()
	var tr float64
	for i := 0; i < p; i++ {
		tr += h.At(i, i)
	}
	scale := tr / float64(p)
	if !(scale > 0) {
		return nil, fmt.Errorf("compress: the calibration inputs of this layer are all zero: %w", ErrInput)
	}
	try := func(rel float64) (*whitened, error) {
		lam := rel * scale
		hh := mat.NewSymDense(p, nil)
		hh.CopySym(h)
		for i := 0; i < p; i++ {
			hh.SetSym(i, i, hh.At(i, i)+lam)
		}
		var ch mat.Cholesky
		w := &whitened{Whitening: Whitening{Route: RouteGram, Ridge: lam, RelRidge: rel, Cond: math.Inf(1), Rank: p}}
		if !ch.Factorize(hh) {
			return w, nil
		}
		w.Cond = ch.Cond()
		if !(w.Cond <= maxCondH) {
			return w, nil
		}
		var u mat.TriDense
		ch.UTo(&u)
		r := mat.DenseCopyOf(&u)
		// b0 = R⁻ᵀ·c.
		b0 := mat.DenseCopyOf(c)
		rb := r.RawMatrix()
		blas64.Trsm(blas.Left, blas.Trans, 1,
			blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: p, Stride: rb.Stride, Data: rb.Data}, b0.RawMatrix())
		w.b0 = b0
		w.unwhiten = func(x *mat.Dense) *mat.Dense { return solveUpper(r, x) }
		return w, nil
	}
	return withRidgeLadder(relRidge, maxCondH, false, try)
}

func whitenProjection(z, t *mat.Dense) (*whitened, error) {
	m, p := z.Dims()
	u, s, v, err := linalg.ThinSVD(z)
	if err != nil {
		return nil, fmt.Errorf("compress: SVD of the calibration inputs: %w", err)
	}
	k := linalg.NumericalRank(s, float64(max(m, p))*0x1p-52)
	if k == 0 {
		return nil, fmt.Errorf("compress: the calibration inputs of this layer are all zero: %w", ErrInput)
	}
	uk := u.Slice(0, m, 0, k)
	var b0 mat.Dense
	b0.Mul(uk.T(), t)
	vs := mat.DenseCopyOf(v.Slice(0, p, 0, k))
	for j := 0; j < k; j++ {
		inv := 1 / s[j]
		for i := 0; i < p; i++ {
			vs.Set(i, j, vs.At(i, j)*inv)
		}
	}
	w := &whitened{Whitening: Whitening{Route: RouteProjection, Cond: s[0] / s[k-1], Rank: k}, b0: &b0}
	if k < p {
		w.Note = fmt.Sprintf("calibration inputs have numerical rank %d < %d columns; minimum-norm solution", k, p)
	}
	w.unwhiten = func(x *mat.Dense) *mat.Dense {
		var o mat.Dense
		o.Mul(vs, x)
		return &o
	}
	return w, nil
}

// triCond estimates the 1-norm condition number of an upper triangular
// matrix (LAPACK Dtrcon), Inf when singular.
func triCond(r *mat.Dense) float64 {
	n, _ := r.Dims()
	raw := r.RawMatrix()
	t := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: raw.Stride, Data: raw.Data}
	for i := 0; i < n; i++ {
		if r.At(i, i) == 0 {
			return math.Inf(1)
		}
	}
	work := make([]float64, 3*n)
	iwork := make([]int, n)
	rc := lapack64.Trcon(lapack.MaxColumnSum, t, work, iwork)
	if rc == 0 {
		return math.Inf(1)
	}
	return 1 / rc
}

// solveUpper returns R⁻¹·x for upper triangular R (x not modified).
func solveUpper(r, x *mat.Dense) *mat.Dense {
	n, _ := r.Dims()
	out := mat.DenseCopyOf(x)
	raw := r.RawMatrix()
	blas64.Trsm(blas.Left, blas.NoTrans, 1,
		blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: n, Stride: raw.Stride, Data: raw.Data}, out.RawMatrix())
	return out
}

// gram returns zᵀz. It goes through gonum's general matrix multiply, which
// runs on all cores with a fixed summation order, rather than the
// symmetric rank-k update, which is serial (measured 4× slower here on 2
// cores for 10000×785 despite doing half the flops).
func gram(z *mat.Dense) *mat.SymDense {
	_, p := z.Dims()
	var g mat.Dense
	g.Mul(z.T(), z)
	h := mat.NewSymDense(p, nil)
	for i := 0; i < p; i++ {
		row := g.RawRowView(i)
		for j := i; j < p; j++ {
			h.SetSym(i, j, 0.5*(row[j]+g.At(j, i)))
		}
	}
	return h
}

// eigGramMin is the smallest dimension from which rightSingular goes
// through the eigendecomposition of the Gram matrix instead of an SVD.
const eigGramMin = 128

// rightSingular returns the singular values s (descending) and right
// singular vectors v of b (r×c), keeping the k = len(s) directions with
// s_k > 0 numerically. Small matrices use an SVD. From eigGramMin on, it
// uses the symmetric eigendecomposition of the smaller Gram matrix bᵀb or
// bbᵀ: gonum's SVD spends most of its time rotating the r×c left vectors in
// its serial QR iteration, and callers only need b·v = u·diag(s). Singular
// values then carry an absolute error of about ε·s_max²/s_k instead of
// ε·s_max, irrelevant for the leading directions a compression keeps.
func rightSingular(b *mat.Dense) ([]float64, *mat.Dense, error) {
	r, c := b.Dims()
	if min(r, c) < eigGramMin {
		_, s, v, err := linalg.ThinSVD(b)
		if err != nil {
			return nil, nil, fmt.Errorf("compress: SVD: %w", err)
		}
		return s, v, nil
	}
	var g mat.Dense
	if c <= r {
		g.Mul(b.T(), b)
	} else {
		g.Mul(b, b.T())
	}
	n, _ := g.Dims()
	sym := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, 0.5*(g.At(i, j)+g.At(j, i)))
		}
	}
	var e mat.EigenSym
	if !e.Factorize(sym, true) {
		return nil, nil, fmt.Errorf("compress: eigendecomposition: %w", linalg.ErrNoConvergence)
	}
	vals := e.Values(nil) // ascending
	var q mat.Dense
	e.VectorsTo(&q)
	top := math.Max(vals[n-1], 0)
	tol := float64(max(r, c)) * 0x1p-52 * top
	k := 0
	for k < n && vals[n-1-k] > tol {
		k++
	}
	if k == 0 {
		k = 1
	}
	s := make([]float64, k)
	vecs := mat.NewDense(n, k, nil)
	for j := 0; j < k; j++ {
		s[j] = math.Sqrt(math.Max(vals[n-1-j], 0))
		for i := 0; i < n; i++ {
			vecs.Set(i, j, q.At(i, n-1-j))
		}
	}
	if c <= r {
		return s, vecs, nil
	}
	// vecs are left vectors u; v = bᵀu/s.
	var v mat.Dense
	v.Mul(b.T(), vecs)
	for j := 0; j < k; j++ {
		inv := 1 / s[j]
		for i := 0; i < c; i++ {
			v.Set(i, j, v.At(i, j)*inv)
		}
	}
	return s, &v, nil
}

// mulTN returns aᵀ·b.
func mulTN(a, b mat.Matrix) *mat.Dense {
	var c mat.Dense
	c.Mul(a.T(), b)
	return &c
}
