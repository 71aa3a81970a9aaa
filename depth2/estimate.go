package depth2

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/tensor"
)

// MomentOptions controls EstimateMoments.
type MomentOptions struct {
	// MaxOrder is the highest moment order (2ℓ+2: 4 for ℓ = 1, 6 for ℓ = 2).
	// Default 4.
	MaxOrder int
	// Dim is the reduced dimension k: 0 keeps all d input dimensions, k < d
	// projects on the top-k eigenspace of T̂_2 first (not in [ATV21]: f_2 has
	// rank m, so its top-k eigenspace spans the w_i; docs/depth2.md). Use
	// −1 to infer k from T̂_2's spectrum against its noise (3× the spectral
	// norm of the split-half difference).
	Dim int
	// NoResidualize turns off the variance reduction by residualised outputs
	// (not in [ATV21]; for the experiment that measures it).
	NoResidualize bool
	// Progress, if non-nil, receives (stage, done, total).
	Progress func(stage string, done, total int)
}

func (o MomentOptions) progress(stage string) func(done, total int) {
	if o.Progress == nil {
		return nil
	}
	return func(done, total int) { o.Progress(stage, done, total) }
}

// EstimateMoments estimates the Hermite moments T_0…T_R of the columns of Y
// (n×p) under the inputs X (n×d, rows ~ N(0, I_d)), the inputs of
// Algorithms 4–6 (the estimator of [ATV21, Lemma D.3]), with three
// practical steps the paper does not have (docs/depth2.md, Deviations):
//
//  1. T̂_1 = E[y·x] and T̂_2 = E[y·(xxᵀ − I)] in d dimensions; for T̂_2 the
//     outputs are first residualised on [1, x] (He_2 is orthogonal to
//     degree ≤ 1, so the mean is unchanged and the ReLU's linear half leaves
//     the variance).
//  2. Dimension reduction through T̂_2 before any higher moment: f_2
//     = Σ a_i·φ(b_i)·w_i w_iᵀ has rank m, so the top-k singular space of
//     [T̂_2^{(1)} … T̂_2^{(p)}] spans the hidden weights (units with large
//     |b_i| excepted), and z = Pᵀx ~ N(0, I_k) carries everything. This
//     turns the d^R cost of T̂_R into k^R.
//  3. Orders ≥ 3 from tensor.HermiteMoments on z, with the outputs
//     residualised on the Hermite features of z up to degree 2
//     (tensor.Residualize; ~2× lower error).
//
// Every order is estimated on the two halves of the samples separately:
// T̂ = (T̂ᵃ + T̂ᵇ)/2, and Moments.HalfDiff = (T̂ᵃ − T̂ᵇ)/2 has the covariance of
// T̂'s error, which calibrates Algorithm 4's thresholds (Thresholds). Y is
// not modified.
func EstimateMoments(ctx context.Context, X, Y *mat.Dense, opt MomentOptions) (*Moments, error) {
	n, d := X.Dims()
	ny, p := Y.Dims()
	if n != ny {
		return nil, fmt.Errorf("%w: X has %d rows but Y has %d", ErrInput, n, ny)
	}
	R := opt.MaxOrder
	if R == 0 {
		R = 4
	}
	if R < 2 || R > tensor.MaxMomentOrder {
		return nil, fmt.Errorf("%w: moment order %d outside [2, %d]", ErrInput, R, tensor.MaxMomentOrder)
	}
	if n < 4 {
		return nil, fmt.Errorf("%w: %d samples", ErrInput, n)
	}
	half := n / 2
	mp := &momentParts{halves: [2][2]int{{0, half}, {half, n}}}
	mp.m0 = [2][]float64{halfMean(Y, mp.halves[0]), halfMean(Y, mp.halves[1])}
	// The centred outputs: residualising on features that include the
	// constant centres them anyway, so only the plain estimator needs them.
	S := Y
	if opt.NoResidualize {
		S = centred(Y)
	}

	// 1. Orders 1 and 2 in d dimensions.
	if err := mp.lowOrders(ctx, X, Y, opt); err != nil {
		return nil, err
	}
	// 2. Dimension reduction.
	mo := &Moments{N: n}
	k := d
	if opt.Dim != 0 {
		var err error
		if k, err = mp.reduce(mo, d, p, opt.Dim); err != nil {
			return nil, err
		}
	}
	// An inferred width is held to the samples the highest order needs
	// before that order is formed: its tensor has SymLen(k, MaxOrder)
	// entries per output and half (4.4·10⁶ at k = 100, order 4: gigabytes),
	// which fewer samples cannot estimate anyway.
	if opt.Dim < 0 {
		if entries := tensor.SymLen(k, opt.MaxOrder); n < 100*entries {
			return nil, errs.Inputf("T̂_2 shows %d units; their order-%d moment has %d distinct entries, and estimating it needs n ≥ 100·%d = %d samples, got %d", k, opt.MaxOrder, entries, entries, 100*entries, n)
		}
	}
	// 3. Orders ≥ 3 in k dimensions, from z = Pᵀx computed on the fly.
	if err := mp.highOrders(ctx, newInputs(X, mo.Basis), S, R, opt); err != nil {
		return nil, err
	}
	mp.assemble(mo, d, k, p, R)
	return mo, nil
}

// momentParts are the two halves' estimates of EstimateMoments before they
// are projected and combined: the means, T̂_1 (d×p), T̂_2 (d×d per channel)
// and the orders ≥ 3 in the reduced dimension.
type momentParts struct {
	halves [2][2]int
	m0     [2][]float64
	T1     [2]*mat.Dense
	T2     [2][]*mat.SymDense
	high   [2][][]*tensor.Symmetric
	// scratch is lowOrders' n×p residuals, which highOrders overwrites.
	scratch *mat.Dense
}

// halfMean is the mean of Y's rows in [rows[0], rows[1]).
func halfMean(Y *mat.Dense, rows [2]int) []float64 {
	_, p := Y.Dims()
	out := make([]float64, p)
	lo, hi := rows[0], rows[1]
	for i := lo; i < hi; i++ {
		for t, v := range Y.RawRowView(i) {
			out[t] += v
		}
	}
	for t := range out {
		out[t] /= float64(hi - lo)
	}
	return out
}

// centred returns Y with each column's mean (over all rows) subtracted.
func centred(Y *mat.Dense) *mat.Dense {
	n, p := Y.Dims()
	S := mat.DenseCopyOf(Y)
	mean := make([]float64, p)
	for t := 0; t < p; t++ {
		mean[t] = mat.Sum(S.ColView(t)) / float64(n)
	}
	for i := 0; i < n; i++ {
		row := S.RawRowView(i)
		for t := range row {
			row[t] -= mean[t]
		}
	}
	return S
}

// lowOrders estimates T̂_1 (from the centred Y) and, from Y residualised
// on [1, x], T̂_2 on each half, in d dimensions. The residuals' buffer is
// kept in mp.scratch for highOrders.
func (mp *momentParts) lowOrders(ctx context.Context, X, Y *mat.Dense, opt MomentOptions) error {
	_, d := X.Dims()
	n, p := Y.Dims()
	mean := make([]float64, p)
	for t := range mean {
		mean[t] = (mp.m0[0][t]*float64(mp.halves[0][1]) + mp.m0[1][t]*float64(n-mp.halves[0][1])) / float64(n)
	}
	for h := 0; h < 2; h++ {
		mp.T1[h] = crossMean(X, Y, mean, mp.halves[h])
	}
	S1 := Y
	if opt.NoResidualize {
		S1 = centred(Y)
	} else {
		var err error
		if S1, err = residualize(ctx, newInputs(X, nil), Y, 1, nil); err != nil {
			return fmt.Errorf("depth2: residualising for T_2: %w", err)
		}
		mp.scratch = S1
	}
	for h := 0; h < 2; h++ {
		lo, hi := mp.halves[h][0], mp.halves[h][1]
		m2, err := tensor.HermiteMoment2(ctx, X.Slice(lo, hi, 0, d).(*mat.Dense), S1.Slice(lo, hi, 0, p).(*mat.Dense), opt.progress(fmt.Sprintf("order-2 moment (half %d)", h+1)))
		if err != nil {
			return err
		}
		mp.T2[h] = m2
	}
	return nil
}

// reduce chooses the reduced dimension k from the spectrum of [T̂_2^{(1)} …
// T̂_2^{(p)}] (dim k, or inferred against the split-half noise when dim < 0)
// and sets mo's Spectrum2, Noise2 and, when k < d, Basis.
func (mp *momentParts) reduce(mo *Moments, d, p, dim int) (int, error) {
	stack := mat.NewDense(d, d*p, nil)
	noise := mat.NewDense(d, d*p, nil)
	for t := 0; t < p; t++ {
		for a := 0; a < d; a++ {
			for b := 0; b < d; b++ {
				x, y := mp.T2[0][t].At(a, b), mp.T2[1][t].At(a, b)
				stack.Set(a, t*d+b, (x+y)/2)
				noise.Set(a, t*d+b, (x-y)/2)
			}
		}
	}
	U, s, _, err := linalg.ThinSVD(stack)
	if err != nil {
		return 0, fmt.Errorf("depth2: SVD of T_2: %w", err)
	}
	_, sn, _, err := linalg.ThinSVD(noise)
	if err != nil {
		return 0, fmt.Errorf("depth2: SVD of T_2's noise: %w", err)
	}
	mo.Spectrum2, mo.Noise2 = s, sn[0]
	k := dim
	if k < 0 {
		k = 0
		for _, v := range s {
			if v > 3*sn[0] && v > 1e-10*s[0] {
				k++
			}
		}
		k = max(k, 1)
	}
	k = min(k, d)
	if k < d {
		mo.Basis = mat.DenseCopyOf(U.Slice(0, d, 0, k))
	}
	return k, nil
}

// momentBlockRows is the number of samples per block of projected inputs
// that highOrders hands to tensor.HermiteMoments for k dimensions: about
// 8 MB of z, at least 65 536 rows (each call allocates ~1.4 MB of scratch
// for k = 5, so fewer calls make less garbage), a multiple of its 4096-row
// chunks (so the chunks are those of one call per half) and fixed by k
// alone (so the sums do not depend on GOMAXPROCS).
func momentBlockRows(k int) int {
	return max(1<<16, (8<<20)/(8*k)/4096*4096)
}

// highOrders estimates the orders 3…R on each half from z (the inputs, or
// their projections computed block by block into a reused buffer: no n×k
// matrix) and the outputs S residualised on the Hermite features of z up to
// degree 2.
func (mp *momentParts) highOrders(ctx context.Context, in inputs, S *mat.Dense, R int, opt MomentOptions) error {
	n, p := S.Dims()
	S2 := S
	if !opt.NoResidualize {
		var err error
		if S2, err = residualize(ctx, in, S, 2, mp.scratch); err != nil {
			return fmt.Errorf("depth2: residualising for orders ≥ 3: %w", err)
		}
	}
	if R < 3 {
		return nil
	}
	k := in.k
	block := momentBlockRows(k)
	var Zb *mat.Dense
	if in.pt != nil {
		Zb = mat.NewDense(min(block, n), k, nil)
	}
	for h := 0; h < 2; h++ {
		lo, hi := mp.halves[h][0], mp.halves[h][1]
		progress := opt.progress(fmt.Sprintf("order-%d moments (half %d)", R, h+1))
		if Zb == nil {
			mh, err := tensor.HermiteMoments(ctx, in.X.Slice(lo, hi, 0, k).(*mat.Dense), S2.Slice(lo, hi, 0, p).(*mat.Dense), R, progress)
			if err != nil {
				return err
			}
			mp.high[h] = mh
			continue
		}
		total, before := (hi-lo+4095)/4096, 0
		var sum [][]*tensor.Symmetric
		for b0 := lo; b0 < hi; b0 += block {
			b1 := min(b0+block, hi)
			zb := Zb.Slice(0, b1-b0, 0, k).(*mat.Dense)
			in.project(zb, b0)
			var prog func(done, total int)
			if progress != nil {
				prog = func(done, _ int) { progress(before+done, total) }
			}
			mh, err := tensor.HermiteMoments(ctx, zb, S2.Slice(b0, b1, 0, p).(*mat.Dense), R, prog)
			if err != nil {
				return err
			}
			before += (b1 - b0 + 4095) / 4096
			// HermiteMoments returns block means; the half's mean weighs
			// them by their rows.
			w := float64(b1-b0) / float64(hi-lo)
			if sum == nil {
				sum = mh
				for _, ch := range sum {
					for _, T := range ch {
						T.Scale(w)
					}
				}
				continue
			}
			for t, ch := range sum {
				for r, T := range ch {
					T.AddScaled(w, mh[t][r])
				}
			}
		}
		mp.high[h] = sum
	}
	return nil
}

// assemble sets mo.T (the mean of the halves), mo.HalfDiff (half their
// difference) and mo.Noise in the k reduced dimensions.
func (mp *momentParts) assemble(mo *Moments, d, k, p, R int) {
	mo.T = make([][]*tensor.Symmetric, p)
	mo.HalfDiff = make([][]*tensor.Symmetric, p)
	mo.Noise = make([]float64, R+1)
	for t := 0; t < p; t++ {
		mo.T[t] = make([]*tensor.Symmetric, R+1)
		mo.HalfDiff[t] = make([]*tensor.Symmetric, R+1)
		for r := 0; r <= R; r++ {
			var a, b *tensor.Symmetric
			switch r {
			case 0:
				a, b = tensor.NewSymmetric(k, 0), tensor.NewSymmetric(k, 0)
				a.Data[0], b.Data[0] = mp.m0[0][t], mp.m0[1][t]
			case 1:
				a, b = project1(mo.Basis, mp.T1[0], t, d, k), project1(mo.Basis, mp.T1[1], t, d, k)
			case 2:
				a, b = project2(mo.Basis, mp.T2[0][t], k), project2(mo.Basis, mp.T2[1][t], k)
			default:
				a, b = mp.high[0][t][r], mp.high[1][t][r]
			}
			sum := a.Clone()
			sum.AddScaled(1, b)
			sum.Scale(0.5)
			diff := a.Clone()
			diff.AddScaled(-1, b)
			diff.Scale(0.5)
			mo.T[t][r], mo.HalfDiff[t][r] = sum, diff
			nd := diff.Norm()
			mo.Noise[r] = math.Hypot(mo.Noise[r], nd)
		}
	}
}

// project1 is column t of T (d×p) in the basis (d×k; nil: the identity).
func project1(basis, T *mat.Dense, t, d, k int) *tensor.Symmetric {
	v := tensor.NewSymmetric(k, 1)
	for j := 0; j < k; j++ {
		s := 0.0
		for a := 0; a < d; a++ {
			b := 1.0
			if basis != nil {
				b = basis.At(a, j)
			} else if a != j {
				continue
			}
			s += b * T.At(a, t)
		}
		v.Data[j] = s
	}
	return v
}

// project2 is Basisᵀ·M·Basis (M itself for a nil basis) as a symmetric
// tensor.
func project2(basis *mat.Dense, M *mat.SymDense, k int) *tensor.Symmetric {
	v := tensor.NewSymmetric(k, 2)
	var PM mat.Dense
	if basis != nil {
		PM.Product(basis.T(), M, basis)
	} else {
		PM.CloneFrom(M)
	}
	v.ForEach(func(pos int, idx []int) { v.Data[pos] = PM.At(idx[0], idx[1]) })
	return v
}

// momentChunk is the number of samples per chunk of the passes below (fixed,
// so that sums do not depend on GOMAXPROCS).
const momentChunk = 1024

// inputs are the rows z_q of EstimateMoments' inputs: x_q, or Pᵀx_q for
// a d×k basis P, computed on the fly (gonum's GEMM is slow for such narrow
// products, and an n×k matrix is memory that is new on every call).
type inputs struct {
	X  *mat.Dense
	pt []float64 // Pᵀ (k×d, row-major); nil: z = x
	k  int
}

func newInputs(X, P *mat.Dense) inputs {
	_, d := X.Dims()
	if P == nil {
		return inputs{X: X, k: d}
	}
	_, k := P.Dims()
	return inputs{X: X, pt: rowMajor(mat.DenseCopyOf(P.T())), k: k}
}

// row returns z_q, in buf (length k) when projected.
func (in inputs) row(q int, buf []float64) []float64 {
	xr := in.X.RawMatrix()
	x := xr.Data[q*xr.Stride : q*xr.Stride+xr.Cols]
	if in.pt == nil {
		return x
	}
	d := xr.Cols
	buf = buf[:in.k]
	for j := range buf {
		buf[j] = vec.Dot4(x, in.pt[j*d:(j+1)*d])
	}
	return buf
}

// project writes z_q for q = lo…lo+rows−1 into the rows of Z (rows×k),
// over parallel chunks.
func (in inputs) project(Z *mat.Dense, lo int) {
	rows, k := Z.Dims()
	zr := Z.RawMatrix()
	parallel.For((rows+momentChunk-1)/momentChunk, func(_, c int) {
		for q := c * momentChunk; q < min((c+1)*momentChunk, rows); q++ {
			z := zr.Data[q*zr.Stride : q*zr.Stride+k]
			copy(z, in.row(lo+q, z))
		}
	})
}

// project returns X·P (n×k) for a d×k basis P.
func project(X, P *mat.Dense) *mat.Dense {
	n, _ := X.Dims()
	_, k := P.Dims()
	Z := mat.NewDense(n, k, nil)
	newInputs(X, P).project(Z, 0)
	return Z
}

// crossMean returns Σ x_q (y_q − mean)ᵀ/(hi−lo) (d×p) over the rows
// [lo, hi) of X and Y, summed over fixed chunks in order.
func crossMean(X, Y *mat.Dense, mean []float64, rows [2]int) *mat.Dense {
	_, d := X.Dims()
	_, p := Y.Dims()
	lo, hi := rows[0], rows[1]
	chunks := (hi - lo + momentChunk - 1) / momentChunk
	groups := min(chunks, 32)
	parts := make([][]float64, groups)
	parallel.For(groups, func(_, g int) {
		acc := make([]float64, p*d) // transposed: row t is Σ s_t·x
		for q := lo + g*chunks/groups*momentChunk; q < min(lo+(g+1)*chunks/groups*momentChunk, hi); q++ {
			x := X.RawRowView(q)
			for t, v := range Y.RawRowView(q) {
				v -= mean[t]
				if v == 0 {
					continue
				}
				at := acc[t*d : (t+1)*d]
				for j, xj := range x {
					at[j] += v * xj
				}
			}
		}
		parts[g] = acc
	})
	out := mat.NewDense(d, p, nil)
	for _, acc := range parts {
		for t := 0; t < p; t++ {
			for j := 0; j < d; j++ {
				out.Set(j, t, out.At(j, t)+acc[t*d+j])
			}
		}
	}
	out.Scale(1/float64(hi-lo), out)
	return out
}

// residualize returns S minus its least-squares fit on the Hermite features
// of the rows z of in up to the given degree (1 or 2) — what
// tensor.Residualize computes in place, and the same features (1, z_a, and
// z_a·z_b − δ_ab for a ≤ b while there are at most
// tensor.MaxResidualFeatures) — with the normal equations over fixed chunks
// (linalg.GramLstSq: 4-row Gram kernel, parallel, the same sums at any
// GOMAXPROCS) and the fit subtracted in one more pass, written to dst (n×p;
// nil: a new matrix; it may not be S). Features too ill-conditioned for the
// normal equations go to tensor.Residualize.
func residualize(ctx context.Context, in inputs, S *mat.Dense, degree int, dst *mat.Dense) (*mat.Dense, error) {
	n, p := S.Dims()
	k := in.k
	f, quad := tensor.ResidualFeatures(k, degree)
	coef, _, err := linalg.GramLstSq(ctx, n, f, p, 0, func(lo, hi int, dst blas64.General) {
		buf := make([]float64, k)
		for q := lo; q < hi; q++ {
			row := dst.Data[(q-lo)*dst.Stride : (q-lo)*dst.Stride+f+p]
			tensor.HermiteFeatures(row[:f], in.row(q, buf), degree, quad)
			copy(row[f:], S.RawRowView(q))
		}
	})
	if dst == nil {
		dst = mat.NewDense(n, p, nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, linalg.ErrIllConditioned) {
			return nil, err
		}
		dst.Copy(S)
		Z := in.X
		if in.pt != nil {
			Z = mat.NewDense(n, k, nil)
			in.project(Z, 0)
		}
		if _, err := tensor.Residualize(ctx, Z, dst, degree); err != nil {
			return nil, err
		}
		return dst, nil
	}
	ct := rowMajor(mat.DenseCopyOf(coef.T())) // row t: the coefficients of output t
	scratch := make([][]float64, runtime.GOMAXPROCS(0))
	parallel.For((n+momentChunk-1)/momentChunk, func(wk, c int) {
		if scratch[wk] == nil {
			scratch[wk] = make([]float64, f+k)
		}
		row, buf := scratch[wk][:f], scratch[wk][f:]
		for q := c * momentChunk; q < min((c+1)*momentChunk, n); q++ {
			tensor.HermiteFeatures(row, in.row(q, buf), degree, quad)
			o, s := dst.RawRowView(q), S.RawRowView(q)
			for t := range o {
				o[t] = s[t] - vec.Dot4(row, ct[t*f:(t+1)*f])
			}
		}
	})
	return dst, ctx.Err()
}
