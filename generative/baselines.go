package generative

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// BaselineSVD is baseline N1 (ours): the top-k right singular vectors of Y
// (n×d), i.e. the paper's top-k left singular vectors of Y. It ignores both
// the truncation and the bias.
func BaselineSVD(Y *mat.Dense, k int) (*mat.Dense, error) {
	if _, _, err := checkY(Y, k); err != nil {
		return nil, err
	}
	_, _, v, err := linalg.TopK(Y, k)
	if err != nil {
		return nil, fmt.Errorf("generative.BaselineSVD: %w", err)
	}
	return v, nil
}

// BaselineCentredSVD is N2: the SVD of Y with every column centred (the
// paper's Y·P⊥). It is exact without truncation, since then Y·P⊥ = M·P⊥; the
// ReLU's distortion is not removed by centring.
func BaselineCentredSVD(Y *mat.Dense, k int) (*mat.Dense, error) {
	if _, _, err := checkY(Y, k); err != nil {
		return nil, err
	}
	yc := mat.DenseCopyOf(Y)
	centreColumns(yc)
	_, _, v, err := linalg.TopK(yc, k)
	if err != nil {
		return nil, fmt.Errorf("generative.BaselineCentredSVD: %w", err)
	}
	return v, nil
}

// BaselinePositivePart is N3: each positive entry minus the mean of its
// column's positive entries, zeros left at 0, then the SVD.
func BaselinePositivePart(Y *mat.Dense, k int) (*mat.Dense, error) {
	n, d, err := checkY(Y, k)
	if err != nil {
		return nil, err
	}
	yc := mat.DenseCopyOf(Y)
	for i := 0; i < d; i++ {
		s, c := 0.0, 0
		for j := 0; j < n; j++ {
			if v := Y.At(j, i); v > 0 {
				s += v
				c++
			}
		}
		if c == 0 {
			continue
		}
		m := s / float64(c)
		for j := 0; j < n; j++ {
			if v := Y.At(j, i); v > 0 {
				yc.Set(j, i, v-m)
			}
		}
	}
	_, _, v, err := linalg.TopK(yc, k)
	if err != nil {
		return nil, fmt.Errorf("generative.BaselinePositivePart: %w", err)
	}
	return v, nil
}

// BaselineMissing is N4: the ALS of Solver B with the hinge removed, so the
// zeros are treated as missing entries (matrix completion with a row offset
// and no censoring). It isolates what the censoring inequalities are worth.
// It returns the d×k basis.
func BaselineMissing(ctx context.Context, Y *mat.Dense, k int) (*mat.Dense, error) {
	return alsBasis(ctx, Y, k, false, nil)
}

// OracleKnownBias is N5's censored completion with b known: Solver B with
// the offset fixed to the true bias (no gauge freedom left). The other N5
// oracle, the SVD of M itself, is exact by construction. It returns the d×k
// basis.
func OracleKnownBias(ctx context.Context, Y *mat.Dense, k int, b []float64) (*mat.Dense, error) {
	_, d := Y.Dims()
	if len(b) != d {
		return nil, fmt.Errorf("%w: b has length %d, Y has %d columns", ErrInput, len(b), d)
	}
	return alsBasis(ctx, Y, k, true, b)
}

func alsBasis(ctx context.Context, Y *mat.Dense, k int, hinge bool, offset []float64) (*mat.Dense, error) {
	if _, _, err := checkY(Y, k); err != nil {
		return nil, err
	}
	p := newProblem(Y, 0)
	st, err := runALS(ctx, p, alsConfig{k: k, hinge: hinge, offset: offset, maxIter: 500, tol: 1e-10})
	if err != nil {
		return nil, err
	}
	U := mat.NewDense(p.d, k, st.u)
	q, err := linalg.Orth(U)
	if err != nil || q == nil {
		return nil, fmt.Errorf("generative: the fitted factor is zero (%v)", err)
	}
	return q, nil
}
