package robust

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/relurec/relurec/linalg"
	"gonum.org/v1/gonum/mat"
)

// OLS returns the least-squares code argmin ‖v − Ac‖ (the generalized LASSO
// without outliers, Plan–Vershynin, which [MR18, §4] cites; a baseline):
// the τ = +Inf limit of (47).
func (s *Solver) OLS(v []float64) ([]float64, error) {
	if len(v) != s.d {
		return nil, fmt.Errorf("%w: v has length %d but A has %d rows", ErrInput, len(v), s.d)
	}
	c, _, _ := s.huberSSN(v, math.Inf(1), nil, 1)
	return c, nil
}

// LAD returns the least-absolute-deviations code argmin ‖v − Ac‖₁ (the
// Candès–Tao decoder, the τ → 0 limit of [MR18, (47)]; a baseline), by
// linalg.L1Regress (iteratively reweighted least squares with an exact refit
// on the exactly fitted rows) with at most iters IRLS rounds (0 means 100).
func (s *Solver) LAD(v []float64, iters int) ([]float64, error) {
	if len(v) != s.d {
		return nil, fmt.Errorf("%w: v has length %d but A has %d rows", ErrInput, len(v), s.d)
	}
	A := mat.NewDense(s.d, s.p, s.a.Data[:s.d*s.p])
	x, _, err := linalg.L1Regress(A, mat.NewVecDense(s.d, append([]float64(nil), v...)), linalg.L1Options{MaxIter: iters})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	return mat.Col(nil, 0, x), nil
}

// Torrent returns the code of TORRENT-FC (Bhatia, Jain, Kar 2015, "Robust
// regression via hard thresholding"; the hard-thresholding baseline [MR18]
// cites): it alternates least squares on an active set with
// re-selecting as active the ⌈(1−β)·d⌉ rows of smallest residual, until the
// set stops changing (at most iters rounds; 0 means 100). β is the assumed
// upper bound on the outlier fraction; it must exceed the true fraction, and
// unlike (47) the method needs it in advance. It returns the code, the rows
// it treated as outliers and the number of rounds.
func (s *Solver) Torrent(v []float64, beta float64, iters int) (c []float64, outliers []int, rounds int, err error) {
	if len(v) != s.d {
		return nil, nil, 0, fmt.Errorf("%w: v has length %d but A has %d rows", ErrInput, len(v), s.d)
	}
	drop := int(math.Ceil(beta * float64(s.d)))
	if beta <= 0 || beta >= 1 || s.d-drop <= s.p {
		return nil, nil, 0, fmt.Errorf("%w: TORRENT's outlier fraction β = %g must lie in (0, 1) and leave more than %d of the %d rows", ErrInput, beta, s.p, s.d)
	}
	if iters <= 0 {
		iters = 100
	}
	c = s.ols(v)
	order := make([]int, s.d)
	var prev []int
	for rounds = 1; rounds <= iters; rounds++ {
		r := s.residual(v, c)
		for i := range order {
			order[i] = i
		}
		// The drop rows of largest |residual| are this round's outliers;
		// ties broken by index so the result does not depend on the sort.
		slices.SortFunc(order, func(a, b int) int {
			if x, y := math.Abs(r[a]), math.Abs(r[b]); x != y {
				return cmp.Compare(y, x)
			}
			return cmp.Compare(a, b)
		})
		out := slices.Clone(order[:drop])
		slices.Sort(out)
		if slices.Equal(out, prev) {
			return c, out, rounds, nil
		}
		prev = out
		if c, err = s.knownSupport(v, out); err != nil {
			return nil, nil, rounds, err
		}
	}
	return c, prev, iters, nil
}
