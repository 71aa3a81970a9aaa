package depth2

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// Improper is the network of Algorithm 5 before merging ([ATV21, Alg 5,
// Lemma D.12]) for one output:
//
//	g(x) = Σ_i [Alpha_i·ReLU(w_i·x + b_i) + AlphaPrime_i·ReLU(−w_i·x − b_i)] + V·x + C
//
// with the units (w_i, b_i) of Algorithm 4 (signs unknown, hence both
// ReLU(z) and ReLU(−z)) and an affine part that absorbs the units whose
// biases are too large to be recovered (Lemma D.13: such a unit is ≈ affine
// or ≈ 0).
type Improper struct {
	W                 *mat.Dense // m′×d
	B                 []float64
	Alpha, AlphaPrime []float64
	V                 []float64
	C                 float64
}

// Eval returns g on the rows of X.
func (g *Improper) Eval(X *mat.Dense) []float64 {
	n, _ := X.Dims()
	m, _ := g.W.Dims()
	var Z mat.Dense
	Z.Mul(X, g.W.T())
	out := make([]float64, n)
	for q := 0; q < n; q++ {
		s := g.C + vec.Dot(X.RawRowView(q), g.V)
		zr := Z.RawRowView(q)
		for i := 0; i < m; i++ {
			z := zr[i] + g.B[i]
			if z > 0 {
				s += g.Alpha[i] * z
			} else {
				s -= g.AlphaPrime[i] * z
			}
		}
		out[q] = s
	}
	return out
}

// Merge is Claim D.14: it rewrites g exactly as a network of m′+2 ReLU
// units and no affine term,
//
//	β_0·ReLU(w_0·x + b_0) − β_0·ReLU(−w_0·x − b_0) + Σ_i β_i·ReLU(w_i·x + b_i),
//
// with β_i = α_i + α′_i, β_0·w_0 = V − Σ α′_i·w_i (β_0 = its norm, w_0 unit)
// and β_0·b_0 = C − Σ α′_i·b_i, using ReLU(−z) = ReLU(z) − z. When V − Σ
// α′_i·w_i = 0 the pair cannot encode the constant; then the pair is
// dropped and the constant becomes the output bias (an edge case the
// paper's Claim D.14 leaves open), giving m′ units.
func (g *Improper) Merge() *nn.Depth2 {
	m, d := g.W.Dims()
	v := append([]float64(nil), g.V...)
	c := g.C
	beta := make([]float64, m)
	for i := 0; i < m; i++ {
		beta[i] = g.Alpha[i] + g.AlphaPrime[i]
		w := g.W.RawRowView(i)
		for j := range v {
			v[j] -= g.AlphaPrime[i] * w[j]
		}
		c -= g.AlphaPrime[i] * g.B[i]
	}
	b0 := math.Sqrt(vec.Dot(v, v))
	extra := 2
	if b0 == 0 {
		extra = 0
	}
	W := mat.NewDense(m+extra, d, nil)
	B := make([]float64, m+extra)
	A := mat.NewDense(1, m+extra, nil)
	for i := 0; i < m; i++ {
		W.SetRow(i, g.W.RawRowView(i))
		B[i] = g.B[i]
		A.Set(0, i, beta[i])
	}
	net := &nn.Depth2{W: W, B: B, A: A, C: []float64{0}}
	if extra == 0 {
		net.C[0] = c
		return net
	}
	w0 := make([]float64, d)
	neg := make([]float64, d)
	for j := range v {
		w0[j] = v[j] / b0
		neg[j] = -w0[j]
	}
	W.SetRow(m, w0)
	W.SetRow(m+1, neg)
	B[m], B[m+1] = c/b0, -c/b0
	A.Set(0, m, b0)
	A.Set(0, m+1, -b0)
	return net
}

// FitImproper is Algorithm 5's regression step ([ATV21, Alg 5]) for p
// outputs: given units (w_i, b_i) it fits Y ≈ ReLU(X·Wᵀ + 1·bᵀ)·Aᵀ + X·Lᵀ +
// 1·Cᵀ by least squares and returns the network with its affine term L.
// Deviations from the paper, both harmless: (1) plain least squares
// instead of projected gradient descent on a truncated loss over a ball
// (the same convex problem without the truncation);
// (2) one feature per unit, not the pair ReLU(z), ReLU(−z): since ReLU(−z) =
// ReLU(z) − z the pair is linearly dependent on the affine features, so it
// spans the same functions (Improper.Merge recovers the paper's form with
// α′ = 0). It uses all samples; the paper's split into halves only
// simplifies the proof. Its L2 error is small even when units with large
// |b_i| were missed, because the affine part absorbs them (Lemma D.13).
//
// The least squares runs on the normal equations accumulated over fixed
// chunks of rows (linalg.GramLstSq: no n×(m+d+1) feature matrix, the same
// bits at any GOMAXPROCS) with one step of iterative refinement; when the
// features are too ill-conditioned for that (a unit almost never active,
// two units that coincide on the samples) it falls back to Householder QR
// on the feature matrix and, if that is rank deficient, to the
// minimum-norm solution.
func FitImproper(ctx context.Context, X, Y *mat.Dense, W *mat.Dense, B []float64) (*nn.Depth2, error) {
	n, d := X.Dims()
	_, p := Y.Dims()
	m, dw := W.Dims()
	if dw != d || len(B) != m {
		return nil, fmt.Errorf("%w: %d units of dimension %d (and %d biases) for %d inputs", ErrInput, m, dw, len(B), d)
	}
	f := m + d + 1
	if n < 2*f {
		return nil, fmt.Errorf("%w: the improper learner fits %d features and needs n ≥ %d samples, got %d", ErrInput, f, 2*f, n)
	}
	rn := newRowNet(W, B, nil, nil, nil)
	xr, yr := X.RawMatrix(), Y.RawMatrix()
	coef, _, err := linalg.GramLstSq(ctx, n, f, p, 1, func(lo, hi int, dst blas64.General) {
		for q := lo; q < hi; q++ {
			row := dst.Data[(q-lo)*dst.Stride : (q-lo)*dst.Stride+f+p]
			rn.improperFeatures(row[:f], xr.Data[q*xr.Stride:q*xr.Stride+d])
			copy(row[f:], yr.Data[q*yr.Stride:q*yr.Stride+p])
		}
	})
	if errors.Is(err, linalg.ErrIllConditioned) {
		coef, err = improperQR(ctx, X, Y, W, B)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("depth2: improper least squares: %w", err)
	}
	net := &nn.Depth2{W: mat.DenseCopyOf(W), B: append([]float64(nil), B...), A: mat.NewDense(p, m, nil), C: make([]float64, p), L: mat.NewDense(p, d, nil)}
	for t := 0; t < p; t++ {
		for i := 0; i < m; i++ {
			net.A.Set(t, i, coef.At(i, t))
		}
		for j := 0; j < d; j++ {
			net.L.Set(t, j, coef.At(m+j, t))
		}
		net.C[t] = coef.At(m+d, t)
	}
	return net, nil
}

// improperFeatures writes FitImproper's features of the sample x into row
// (length m+d+1): ReLU(w_i·x + b_i) for every unit, then x, then 1.
func (r *rowNet) improperFeatures(row, x []float64) {
	r.hidden(x, row[:r.m])
	copy(row[r.m:], x)
	row[len(row)-1] = 1
}

// improperQR is FitImproper's least squares by Householder QR on the n×f
// feature matrix, and the minimum-norm solution when that is rank
// deficient: the fallback for features too ill-conditioned for the normal
// equations.
func improperQR(ctx context.Context, X, Y *mat.Dense, W *mat.Dense, B []float64) (*mat.Dense, error) {
	n, d := X.Dims()
	_, p := Y.Dims()
	m := len(B)
	f := m + d + 1
	F := mat.NewDense(n, f, nil)
	rn := newRowNet(W, B, nil, nil, nil)
	for q := 0; q < n; q++ {
		if q%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rn.improperFeatures(F.RawRowView(q), X.RawRowView(q))
	}
	coef, err := linalg.LstSq(F, Y)
	if errors.Is(err, linalg.ErrRankDeficient) {
		// A unit that is (almost) never active, or two units that coincide
		// on the samples: the minimum-norm solution fits equally well.
		pinv, perr := linalg.Pinv(F, 1e-12)
		if perr != nil {
			return nil, perr
		}
		coef = mat.NewDense(f, p, nil)
		coef.Mul(pinv, Y)
		err = nil
	}
	return coef, err
}
