package twolayer

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/tensor"
)

// The tensor start's second-moment sums — the input covariance, the order-2
// Hermite moment and the normal equations of the residualisation — are
// symmetric Gram matrices Σ_q a_q·a_qᵀ of per-sample rows. They are summed
// here as symmetric products (upper triangle only, linalg.AddGram's 4-row
// kernel on row-major chunks, no transposed copy): half the flops of the
// general matrix product, measured 3× faster than gonum's GEMM for a
// 4096×231 chunk. As in linalg.GramLstSq, the rows go in linalg.GramChunk
// chunks, the chunks in fixed groups whose sums are added in order, so
// every result has the same bits at any GOMAXPROCS.

// gramGroups is the most groups of chunks summed separately (the units of
// parallel work); gramGroupFloats caps the memory of their accumulators.
const (
	gramGroups      = 32
	gramGroupFloats = 1 << 22
)

// groupSums splits n ≥ 1 rows into linalg.GramChunk-row chunks and fixed
// groups of consecutive chunks; for each group it calls add(wk, acc, lo, hi)
// for its chunks in order on a zeroed accumulator of size floats (wk
// identifies the goroutine, for scratch space), and returns the groups'
// accumulators added in order. The grouping depends only on n and size.
func groupSums(ctx context.Context, n, size int, add func(wk int, acc []float64, lo, hi int)) ([]float64, error) {
	chunks := (n + linalg.GramChunk - 1) / linalg.GramChunk
	groups := max(1, min(chunks, gramGroups, gramGroupFloats/max(size, 1)))
	parts := make([][]float64, groups)
	parallel.For(groups, func(wk, g int) {
		if ctx.Err() != nil {
			return
		}
		acc := make([]float64, size)
		for c := g * chunks / groups; c < (g+1)*chunks/groups; c++ {
			add(wk, acc, c*linalg.GramChunk, min((c+1)*linalg.GramChunk, n))
		}
		parts[g] = acc
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := parts[0]
	for _, p := range parts[1:] {
		for i, v := range p {
			out[i] += v
		}
	}
	return out, nil
}

// rowsOf is rows lo…hi−1 of X as a blas64.General (no copy).
func rowsOf(X *mat.Dense, lo, hi int) blas64.General {
	raw := X.RawMatrix()
	return blas64.General{Rows: hi - lo, Cols: raw.Cols, Stride: raw.Stride, Data: raw.Data[lo*raw.Stride:]}
}

// symOuter returns XᵀX·scale (d×d) for X n×d — mat.SymDense.SymOuterK's
// product, which gonum computes unblocked, one sweep over all of X per row of
// the result.
func symOuter(ctx context.Context, X *mat.Dense, scale float64) (*mat.SymDense, error) {
	n, d := X.Dims()
	G, err := groupSums(ctx, n, d*d, func(_ int, acc []float64, lo, hi int) {
		linalg.AddGram(acc, rowsOf(X, lo, hi))
	})
	if err != nil {
		return nil, err
	}
	out := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			out.SetSym(i, j, scale*G[i*d+j])
		}
	}
	return out, nil
}

// hermiteMoment2 is tensor.HermiteMoment2: the order-2 Hermite moments
// E[s_t·(xxᵀ − I)] (d×d) for every column t of S (n×p), with the weighted
// sums Σ_q s_qt·x_q·x_qᵀ taken as symmetric products: the rows √|s_qt|·x_q
// of positive and of negative weights go to two Gram sums, subtracted at
// the end (each row enters one of them: d²/2 multiply-adds per sample and
// channel, half the GEMM there). progress is called before and after.
func hermiteMoment2(ctx context.Context, X, S *mat.Dense, progress func(done, total int)) ([]*mat.SymDense, error) {
	n, d := X.Dims()
	_, p := S.Dims()
	if progress != nil {
		progress(0, 1)
	}
	dd := d * d
	buf := make([][]float64, maxProcs())
	// acc: per channel the positive and the negative Gram (d² each), then
	// the p weight sums.
	acc, err := groupSums(ctx, n, 2*p*dd+p, func(wk int, acc []float64, lo, hi int) {
		if buf[wk] == nil {
			buf[wk] = make([]float64, 2*linalg.GramChunk*d)
		}
		pos, neg := buf[wk][:linalg.GramChunk*d], buf[wk][linalg.GramChunk*d:]
		for t := 0; t < p; t++ {
			np, nn := 0, 0
			sum := 0.0
			for q := lo; q < hi; q++ {
				s := S.RawRowView(q)[t]
				sum += s
				var dst []float64
				switch {
				case s > 0:
					dst = pos[np*d : (np+1)*d]
					np++
				case s < 0:
					dst = neg[nn*d : (nn+1)*d]
					nn++
				default:
					continue
				}
				r := math.Sqrt(math.Abs(s))
				for j, v := range X.RawRowView(q) {
					dst[j] = r * v
				}
			}
			acc[2*p*dd+t] += sum
			linalg.AddGram(acc[2*t*dd:(2*t+1)*dd], blas64.General{Rows: np, Cols: d, Stride: d, Data: pos})
			linalg.AddGram(acc[(2*t+1)*dd:(2*t+2)*dd], blas64.General{Rows: nn, Cols: d, Stride: d, Data: neg})
		}
	})
	if err != nil {
		return nil, err
	}
	inv := 1 / float64(n)
	out := make([]*mat.SymDense, p)
	for t := range out {
		P, N := acc[2*t*dd:(2*t+1)*dd], acc[(2*t+1)*dd:(2*t+2)*dd]
		M := mat.NewSymDense(d, nil)
		for i := 0; i < d; i++ {
			for j := i; j < d; j++ {
				v := inv * (P[i*d+j] - N[i*d+j])
				if i == j {
					v -= inv * acc[2*p*dd+t]
				}
				M.SetSym(i, j, v)
			}
		}
		out[t] = M
	}
	if progress != nil {
		progress(1, 1)
	}
	return out, nil
}

// residualize is tensor.Residualize (every column of S replaced by its
// least-squares residual on the Hermite features 1, z_a, z_a·z_b − δ_ab of
// the rows of Z up to degree 0, 1 or 2, the quadratic ones only up to
// tensor.MaxResidualFeatures features) with the normal equations from
// linalg.GramLstSq — the chunked symmetric Gram of [features S], scaled to a
// unit diagonal, that depth2 residualises with too — instead of a full GEMM
// for the symmetric Gram; the residual pass runs over fixed chunks in
// parallel. When the features are too ill-conditioned for the normal
// equations (never for Gaussian samples, whose features are nearly
// orthonormal) it falls back to tensor.Residualize.
func residualize(ctx context.Context, Z, S *mat.Dense, degree int) error {
	n, k := Z.Dims()
	return residualizeRows(ctx, n, k, func(lo, hi int, _ *[]float64) blas64.General { return rowsOf(Z, lo, hi) }, func() *mat.Dense { return Z }, S, degree)
}

// residualizeRows is residualize with the rows of the n×k matrix Z given a
// chunk at a time by zrows (which may compute them into *buf, grown as
// needed), so that Z need not be held; whole returns Z itself, for the
// rare fallback to tensor.Residualize.
func residualizeRows(ctx context.Context, n, k int, zrows func(lo, hi int, buf *[]float64) blas64.General, whole func() *mat.Dense, S *mat.Dense, degree int) error {
	_, p := S.Dims()
	f := 1
	if degree >= 1 {
		f += k
	}
	quad := degree >= 2 && f+k*(k+1)/2 <= tensor.MaxResidualFeatures
	if quad {
		f += k * (k + 1) / 2
	}
	features := func(z, row []float64) {
		row[0] = 1
		if degree < 1 {
			return
		}
		copy(row[1:1+k], z)
		if quad {
			at := 1 + k
			for a := 0; a < k; a++ {
				za := z[a]
				for b := a; b < k; b++ {
					v := za * z[b]
					if a == b {
						v--
					}
					row[at] = v
					at++
				}
			}
		}
	}
	// GramLstSq's fill has no worker index: the chunk buffers of Z's rows
	// come from a pool.
	pool := sync.Pool{New: func() any { return new([]float64) }}
	C, _, err := linalg.GramLstSq(ctx, n, f, p, 0, func(lo, hi int, dst blas64.General) {
		buf := pool.Get().(*[]float64)
		z := zrows(lo, hi, buf)
		for q := lo; q < hi; q++ {
			row := dst.Data[(q-lo)*dst.Stride : (q-lo)*dst.Stride+f+p]
			features(z.Data[(q-lo)*z.Stride:(q-lo)*z.Stride+k], row[:f])
			copy(row[f:], S.RawRowView(q))
		}
		pool.Put(buf)
	})
	if errors.Is(err, linalg.ErrIllConditioned) || errors.Is(err, linalg.ErrShape) {
		_, err = tensor.Residualize(ctx, whole(), S, degree)
		return err
	}
	if err != nil {
		return err
	}
	cr := C.RawMatrix()
	chunks := (n + linalg.GramChunk - 1) / linalg.GramChunk
	buf := make([][]float64, maxProcs())
	zbuf := make([][]float64, maxProcs())
	parallel.For(chunks, func(wk, c int) {
		if ctx.Err() != nil {
			return
		}
		if buf[wk] == nil {
			buf[wk] = make([]float64, f+p)
		}
		phi, fit := buf[wk][:f], buf[wk][f:]
		lo := c * linalg.GramChunk
		z := zrows(lo, min((c+1)*linalg.GramChunk, n), &zbuf[wk])
		for q := lo; q < min((c+1)*linalg.GramChunk, n); q++ {
			features(z.Data[(q-lo)*z.Stride:(q-lo)*z.Stride+k], phi)
			rowTimes(fit, phi, cr.Data, cr.Stride)
			s := S.RawRowView(q)
			for t, v := range fit {
				s[t] -= v
			}
		}
	})
	return ctx.Err()
}

// rowTimes sets out = x·B for B (len(x)×len(out), row-major in b with the
// given stride). Each entry is summed over x in order, as dot does, but the
// len(out) sums run side by side instead of as one chain of dependent adds.
func rowTimes(out, x, b []float64, stride int) {
	for j := range out {
		out[j] = 0
	}
	for i, xi := range x {
		row := b[i*stride : i*stride+len(out)]
		for j, v := range row {
			out[j] += xi * v
		}
	}
}

// maxProcs is the number of goroutines parallel.For may run (the size of
// per-worker scratch tables).
func maxProcs() int { return runtime.GOMAXPROCS(0) }
