package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/tensor"
)

// The parity start is the exact route's first start for the ReLU. It is not
// in [BJW19] (docs/twolayer.md, "Parity start"); it needs only second
// moments, where the paper's tensor start needs the order-4 Hermite moment,
// whose small ReLU coefficient makes it the noisiest and the most expensive
// step of the fit.
//
// For inputs whose distribution is symmetric (x and −x equally likely, as
// for every centred Gaussian) the identity ReLU(t) = t/2 + |t|/2 splits each
// hidden activation into an odd part, linear in x, and an even part,
// uncorrelated with x. Let red = Y·P·diag(1/σ) (n×k) be the outputs reduced
// to the top k right singular vectors P of Y, scaled by the singular values
// σ; noiseless, red_q = ReLU(V·x_q)ᵀ·A for an invertible k×k A. Its least-squares regression on x, C = E[xxᵀ]⁻¹E[x·red]
// (d×k), is Vᵀ·A/2, so each sample splits into
//
//	b_q = Cᵀ·x_q = Aᵀ·t_q/2      (the odd part, t_q = V·x_q),
//	r_q = red_q − b_q = Aᵀ·|t_q|/2 (the even part),
//
// and the columns g_j of G = A⁻¹ satisfy (g_j·b_q)² = (g_j·r_q)² on every
// sample: g_jᵀ·(b_q b_qᵀ − r_q r_qᵀ)·g_j = 0. Linear in the symmetric
// matrix S = g_j g_jᵀ, these equations have exactly the k-dimensional
// solution space spanned by the g_j g_jᵀ when no two rows of V are parallel
// (written with G, an equation reads Σ_{i≠l} S'_il·(t_i t_l − |t_i t_l|) = 0
// for S = G·S'·Gᵀ, whose only solutions are the diagonal S'). The null space
// of the k(k+1)/2-column system is therefore a set of slices
// Σ_j c_j·g_j g_jᵀ, which Jennrich decomposes as it does the tensor start's
// moment slices, and the rows of V are the directions C·g_j.
//
// C's sampling error (the even part's correlation with x in the sample,
// relative size ≈ √(d/rows)) is the start's only error on noiseless data;
// C is regressed on parityLinearRows samples, enough to land well inside
// the polish's margin. The equations use parityRows samples: they hold
// exactly with the true C, so more rows only average C's error.
//
// Cost: the (d+k)² Gram of [X, red] on parityLinearRows rows for C, the
// equations' Gram on parityRows rows (k⁴/8 multiply-adds each), and a
// k(k+1)/2-square symmetric eigenproblem.

// parityRows is how many samples the parity start's equations are taken
// from: max(2·10⁴, 20 per unknown).
func parityRows(n, k int) int { return min(n, max(20000, 10*k*(k+1))) }

// parityLinearRows is how many samples the parity start's linear part C is
// regressed on: max(2·10⁴, 400·d), for a start about 1.1·√(d/rows) ≤ 0.055
// rad from V — the exact polish certifies from starts 0.33 rad away
// (measured at d=20, k=5, n=5000 and d=100, k=20, n=8·10⁴ and 2·10⁵).
func parityLinearRows(n, d int) int { return min(n, max(20000, 400*d)) }

// parityMaxK is the widest network the exact route tries the parity start
// on: its equations' Gram costs k⁴/8 per sample, k⁶ in all (k = 40: 4·10⁹
// multiply-adds), where the zero-set start that runs before it grows as k³.
const parityMaxK = 40

// spreadRow is the sample behind row i of an evenly spread subsample of
// rows samples out of n: a sorted file then costs nothing, where its first
// rows would show one corner of the input distribution.
func spreadRow(i, rows, n int) int { return int(int64(i) * int64(n) / int64(rows)) }

// parityApplies reports whether fitTensor starts the exact route from the
// parity start: a ReLU network whose exact route will run
// (exactRouteRuns), unless Options.Start asks for the tensor start.
func parityApplies(p *problem, opt Options) bool {
	if opt.Start == StartTensor || opt.Activation != nn.ReLU {
		return false
	}
	_, ok := exactRouteRuns(p, opt)
	return ok
}

// parityStart computes the parity start (the comment above) for p, from
// evenly spread subsamples (parityLinearRows, parityRows). The returned
// Start has no tensor moments; Resample on it decomposes the same
// equations' null space again with fresh randomness.
func parityStart(ctx context.Context, p *problem, opt Options) (*Start, error) {
	red0, err := reduceOutputs(p, opt.Hidden, "the parity start", exactFloor)
	if err != nil {
		return nil, err
	}
	k := red0.K
	st := &Start{p: p, opt: opt, Rows: p.n, K: k, Inferred: red0.Inferred, ExactRank: red0.ExactRank,
		SingularValues: red0.S, Warnings: red0.Warnings}
	n, d, m := p.n, p.d, p.m
	// P·diag(1/σ): the reduced outputs have unit second moments, which
	// conditions the equations' unknowns evenly.
	P := mat.DenseCopyOf(red0.V.Slice(0, m, 0, k))
	for j := 0; j < k; j++ {
		for i := 0; i < m; i++ {
			P.Set(i, j, P.At(i, j)/red0.S[j])
		}
	}
	// C: the least-squares regression of red on x, on an evenly spread
	// subsample.
	opt.progress("parity start", 0, 2)
	rowsC := parityLinearRows(n, d)
	st.Rows = rowsC
	pr, xr, yr := P.RawMatrix(), p.X.RawMatrix(), p.Y.RawMatrix()
	C, _, err := linalg.GramLstSq(ctx, rowsC, d, k, 0, func(lo, hi int, dst blas64.General) {
		for i := lo; i < hi; i++ {
			q := spreadRow(i, rowsC, n)
			row := dst.Data[(i-lo)*dst.Stride : (i-lo+1)*dst.Stride]
			copy(row[:d], xr.Data[q*xr.Stride:q*xr.Stride+d])
			kern.RowTimes(row[d:d+k], yr.Data[q*yr.Stride:q*yr.Stride+m], pr.Data, pr.Stride)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("twolayer: parity start, linear part: %w", err)
	}

	// The equations' Gram on evenly spread rows, and the even part's sum
	// there.
	gram, mean, err := parityGram(ctx, p.X, p.Y, P, C, parityRows(n, k))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x5eed_7e45))
	if st.parity, err = newParityEquations(gram, C, mean, k, rng); err != nil {
		return nil, err
	}
	opt.progress("parity start", 1, 2)
	if err := st.decomposeParity(rng); err != nil {
		return nil, err
	}
	opt.progress("parity start", 2, 2)
	return st, nil
}

// parityEquations is what the parity start decomposes: k slices spanning
// the null space of its equations, the regression C (d×k) that lifts their
// components to rows of V, and the even part's sum, which fixes the signs.
type parityEquations struct {
	slices []*mat.SymDense
	C      *mat.Dense
	// mean is the even part's sum Σ r_q: E[r] = Aᵀ·E|t|/2 has a positive
	// component along every g_j (g_j·E[r] = E|t_j|/2), which fixes each
	// row's sign.
	mean []float64
	// gap is σ_{k+1}/σ_k of the equations (the square root of their Gram's
	// eigenvalues): how clearly the null space stands out.
	gap float64
}

// newParityEquations keeps the k eigenvectors of the equations' Gram gram
// (k(k+1)/2 square) with the smallest eigenvalues, as k×k slices
// (linalg.SmallestEigen, whose random start comes from rng).
func newParityEquations(gram *mat.SymDense, C *mat.Dense, mean []float64, k int, rng *rand.Rand) (*parityEquations, error) {
	if k == 1 {
		// One unknown, one unit: no null space to find and nothing to
		// decompose (decomposeParity).
		return &parityEquations{C: C, mean: mean, gap: math.Inf(1)}, nil
	}
	vals, vecs, err := linalg.SmallestEigen(gram, k, k+1, rng)
	if err != nil {
		return nil, fmt.Errorf("twolayer: parity start: the null space of the equations: %w", err)
	}
	slices := make([]*mat.SymDense, k)
	for i := range slices {
		S := mat.NewSymDense(k, nil)
		at := 0
		for a := 0; a < k; a++ {
			for c := a; c < k; c++ {
				S.SetSym(a, c, vecs.At(at, i))
				at++
			}
		}
		slices[i] = S
	}
	gap := math.Inf(1)
	if vals[k-1] > 0 {
		gap = math.Sqrt(vals[k] / vals[k-1])
	}
	return &parityEquations{slices: slices, C: C, mean: mean, gap: gap}, nil
}

// decomposeParity sets st.V from the parity start's equations by Jennrich
// with random combinations drawn from rng.
func (st *Start) decomposeParity(rng *rand.Rand) error {
	pe := st.parity
	k := st.K
	// One unit: the null space is g·gᵀ itself, nothing to decompose.
	dec := &tensor.Decomposition{W: mat.NewDense(1, 1, []float64{1}), MinGap: math.Inf(1)}
	if k > 1 {
		var err error
		if dec, err = tensor.Jennrich(pe.slices, rng, tensor.JennrichOptions{}); err != nil {
			return fmt.Errorf("twolayer: parity start: %w", err)
		}
	}
	st.JennrichGap, st.JennrichTries, st.JennrichResidual = dec.MinGap, dec.Tries, dec.Residual
	d, _ := pe.C.Dims()
	var lifted mat.Dense
	lifted.Mul(pe.C, dec.W) // d×k: column j ∝ v_j
	V := mat.NewDense(k, d, nil)
	V.Copy(lifted.T())
	for j := 0; j < k; j++ {
		if dot(pe.mean, mat.Col(nil, j, dec.W)) < 0 {
			row := V.RawRowView(j)
			for i := range row {
				row[i] = -row[i]
			}
		}
	}
	normalizeRows(V)
	st.V = V
	return nil
}

// parityGram returns the Gram matrix (k(k+1)/2 square) of the parity
// start's equations on rows samples spread evenly
// over X and Y (spreadRow) —
// one equation per sample, b_a·b_c − r_a·r_c for a ≤ c (doubled off the
// diagonal, so that the unknowns are the upper triangle of S), with
// red = Y·P, b = X·C and r = red − b — and the sum of r over those rows.
// The sums run over linalg.GramChunk-row chunks in fixed groups (groupSums):
// the same bits at any GOMAXPROCS.
func parityGram(ctx context.Context, X, Y, P, C *mat.Dense, rows int) (gram *mat.SymDense, rsum []float64, err error) {
	_, d := X.Dims()
	m, k := P.Dims()
	kk := k * (k + 1) / 2
	xr, yr, pr, cr := X.RawMatrix(), Y.RawMatrix(), P.RawMatrix(), C.RawMatrix()
	n, _ := X.Dims()
	type scratch struct{ red, b, f []float64 }
	bufs := make([]*scratch, maxProcs())
	// The accumulator holds the Gram (kk×kk) and then Σ r (k).
	sums, err := groupSums(ctx, rows, kk*kk+k, func(wk int, acc []float64, lo, hi int) {
		s := bufs[wk]
		if s == nil {
			g := linalg.GramChunk
			s = &scratch{red: make([]float64, g*k), b: make([]float64, g*k), f: make([]float64, g*kk)}
			bufs[wk] = s
		}
		rs := acc[kk*kk:]
		for i := lo; i < hi; i++ {
			q := spreadRow(i, rows, n)
			kern.RowTimes(s.red[(i-lo)*k:(i-lo+1)*k], yr.Data[q*yr.Stride:q*yr.Stride+m], pr.Data, pr.Stride)
			kern.RowTimes(s.b[(i-lo)*k:(i-lo+1)*k], xr.Data[q*xr.Stride:q*xr.Stride+d], cr.Data, cr.Stride)
		}
		for q := 0; q < hi-lo; q++ {
			b, r := s.b[q*k:(q+1)*k], s.red[q*k:(q+1)*k]
			for a := range r {
				r[a] -= b[a]
				rs[a] += r[a]
			}
			f := s.f[q*kk : (q+1)*kk]
			at := 0
			for a := 0; a < k; a++ {
				ba, ra := b[a], r[a]
				f[at] = ba*ba - ra*ra
				at++
				for c := a + 1; c < k; c++ {
					f[at] = 2 * (ba*b[c] - ra*r[c])
					at++
				}
			}
		}
		linalg.AddGram(acc[:kk*kk], blas64.General{Rows: hi - lo, Cols: kk, Stride: kk, Data: s.f})
	})
	if err != nil {
		return nil, nil, err
	}
	gram = mat.NewSymDense(kk, nil)
	for i := 0; i < kk; i++ {
		for j := i; j < kk; j++ {
			gram.SetSym(i, j, sums[i*kk+j])
		}
	}
	return gram, sums[kk*kk:], nil
}
