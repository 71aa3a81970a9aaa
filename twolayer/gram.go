package twolayer

import (
	"context"
	"math"
	"runtime"
	"slices"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/outer"
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

// maxProcs is the number of goroutines parallel.For may run (the size of
// per-worker scratch tables).
func maxProcs() int { return runtime.GOMAXPROCS(0) }

// residualizeHermite replaces every column s of S (n×p) by its residual on
// the Hermite features of the rows z of Z (n×k) up to the given degree (0, 1
// or 2): 1, z_a, and z_a·z_b − δ_ab for a ≤ b, the quadratic ones only up
// to tensor.MaxResidualFeatures features — tensor.Residualize's features, and
// the same purpose: He_r is orthogonal under the Gaussian to every
// polynomial of degree < r, so the expectation of an order-r Hermite moment
// of S is unchanged when degree < r, while its variance drops. The rows of
// Z come a chunk at a time from zrows (which may compute them into *buf,
// grown as needed), so that Z need not be held.
//
// The coefficients are not the least-squares ones from the n·f²/2 sample
// Gram matrix (f features) but a Jacobi iteration on the normal equations
// preconditioned by the features' population Gram matrix: for z ~ N(0, I)
// the features are orthogonal with E[φ²] = 1, 1, and 2 (z_a² − 1) or 1
// (z_a·z_b, a ≠ b), the assumption the tensor start's Hermite moments make
// already (its inputs are whitened, or have covariance I within sampling
// error). The first estimate β₀ = D⁻¹·E[φ·s] is off the least-squares one
// by O(√(f/n)) relative; one sweep β₁ = β₀ + D⁻¹·E[φ·(s − φᵀβ₀)] squares
// that. Measured on the start's angle errors (d = 20…50, k = 5…10, n near
// the route's floor, 16 seeds): with β₀ alone the starts were worse (two
// needed a second start), with β₁ they match the least-squares ones. Cost:
// three passes of n·f·p multiply-adds instead of n·(f+p)²/2 + n·f·p.
// Sums run over linalg.GramChunk-row chunks in fixed groups added in order:
// the same bits at any GOMAXPROCS.
func residualizeHermite(ctx context.Context, n, k int, zrows func(lo, hi int, buf *[]float64) blas64.General, S *mat.Dense, degree int) error {
	_, rz, err := residualizeHermiteSums(ctx, n, k, zrows, S, degree)
	if err != nil {
		return err
	}
	chunks := (n + linalg.GramChunk - 1) / linalg.GramChunk
	bufs := make([]*residScratch, maxProcs())
	parallel.For(chunks, func(wk, c int) {
		if ctx.Err() != nil {
			return
		}
		lo, hi := c*linalg.GramChunk, min((c+1)*linalg.GramChunk, n)
		if bufs[wk] == nil {
			bufs[wk] = &residScratch{}
		}
		rz.apply(zrows(lo, hi, &bufs[wk].z), S, lo, bufs[wk])
	})
	return ctx.Err()
}

// residualizer is the last step of residualizeHermite, kept for later:
// S −= F·β row by row, F the Hermite features of z (fill). The tensor start
// applies it to each chunk of its reduced outputs in the first slice pass,
// which computes that chunk's z anyway (the same operations, the same bits
// as a pass of its own).
type residualizer struct {
	k, f, p int
	degree  int
	quad    bool
	beta    []float64 // f×p
}

// residScratch is a worker's scratch for residualizer.apply.
type residScratch struct{ z, phi, r []float64 }

// fill writes the features of the rows of z into dst (rows×f): 1, z_a,
// and z_a·z_b − δ_ab for a ≤ b, as far as degree and quad allow.
func (rz *residualizer) fill(z blas64.General, dst []float64) {
	k, f := rz.k, rz.f
	for q := 0; q < z.Rows; q++ {
		zr := z.Data[q*z.Stride : q*z.Stride+k]
		tensor.HermiteFeatures(dst[q*f:(q+1)*f], zr, rz.degree, rz.quad)
	}
}

// apply residualises rows lo… of S whose features come from z (z.Rows
// rows): S −= F·β (internal/kern for F·β).
func (rz *residualizer) apply(z blas64.General, S *mat.Dense, lo int, b *residScratch) {
	rows, f, p := z.Rows, rz.f, rz.p
	if len(b.phi) < rows*f {
		b.phi = make([]float64, rows*f)
	}
	if len(b.r) < rows*p {
		b.r = make([]float64, rows*p)
	}
	rz.fill(z, b.phi)
	kern.MulRows(b.r, p, b.phi, f, rz.beta, p, rows, f, p)
	sr := S.RawMatrix()
	for q := 0; q < rows; q++ {
		fit := b.r[q*p : (q+1)*p]
		s := sr.Data[(lo+q)*sr.Stride : (lo+q)*sr.Stride+p]
		for t, v := range fit {
			s[t] -= v
		}
	}
}

// residualizeHermiteSums is residualizeHermite without its last pass: it
// returns the coefficients (residualizer: apply them to every chunk of S to
// finish) and the sums its first pass takes over the unresidualised S:
// first (p×f, row t) holds Σ_q s_qt·φ_q for the features φ = [1, z, …] in
// that order, so first[t·f + 1 + a] = Σ_q s_qt·z_qa when degree ≥ 1 — the
// first moment Sᵀ·Z with no pass of its own.
func residualizeHermiteSums(ctx context.Context, n, k int, zrows func(lo, hi int, buf *[]float64) blas64.General, S *mat.Dense, degree int) (first []float64, rz *residualizer, err error) {
	_, p := S.Dims()
	f, quad := tensor.ResidualFeatures(k, degree)
	rz = &residualizer{k: k, f: f, p: p, degree: degree, quad: quad}
	fill := rz.fill
	bufs := make([]*residScratch, maxProcs())
	buf := func(wk int) *residScratch {
		if bufs[wk] == nil {
			bufs[wk] = &residScratch{phi: make([]float64, linalg.GramChunk*f), r: make([]float64, linalg.GramChunk*p)}
		}
		return bufs[wk]
	}
	sr := S.RawMatrix()
	// ginv[i] is 1/(n·E[φ_i²]).
	ginv := make([]float64, f)
	for i := range ginv {
		ginv[i] = 1 / float64(n)
	}
	if quad {
		at := 1 + k
		for a := 0; a < k; a++ {
			ginv[at] /= 2 // z_a² − 1
			at += k - a
		}
	}
	var beta []float64 // f×p; nil before the first estimate
	for sweep := 0; sweep < 2; sweep++ {
		// acc is (Fᵀ·R)ᵀ (p×f) for R = S, then S − F·β: the outer
		// products run along the long feature rows.
		acc, err := groupSums(ctx, n, f*p, func(wk int, acc []float64, lo, hi int) {
			b := buf(wk)
			fill(zrows(lo, hi, &b.z), b.phi)
			phi := blas64.General{Rows: hi - lo, Cols: f, Stride: f, Data: b.phi}
			if beta == nil {
				outer.Add(acc, rowsOf(S, lo, hi), phi)
				return
			}
			kern.MulRows(b.r, p, b.phi, f, beta, p, hi-lo, f, p)
			for q := lo; q < hi; q++ {
				r := b.r[(q-lo)*p : (q-lo+1)*p]
				for t, v := range sr.Data[q*sr.Stride : q*sr.Stride+p] {
					r[t] = v - r[t]
				}
			}
			outer.Add(acc, blas64.General{Rows: hi - lo, Cols: p, Stride: p, Data: b.r}, phi)
		})
		if err != nil {
			return nil, nil, err
		}
		if beta == nil {
			beta = make([]float64, f*p)
			first = slices.Clone(acc)
		}
		for i := 0; i < f; i++ {
			for t := 0; t < p; t++ {
				beta[i*p+t] += ginv[i] * acc[t*f+i]
			}
		}
	}
	rz.beta = beta
	return first, rz, nil
}
