package twolayer

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// problem is the resolved learning problem that Fit builds once and every
// route and step reads: the data, checked once (shapes, NaN/Inf, Y ≠ 0), their
// sizes, and the thin SVD of Y, computed on first use and then shared. The
// auto route's rank screen, the tensor start, the ICA route and the worst-case
// route all read the same factorisation instead of each computing its own.
type problem struct {
	X, Y    *mat.Dense
	n, d, m int

	svd *thinSVD
	// svdCount counts the SVDs of Y computed for this problem; a test holds
	// Fit's automatic route to one.
	svdCount int
}

// thinSVD is Y = U·diag(S)·Vᵀ with singular values in descending order.
type thinSVD struct {
	U *mat.Dense // n×m'
	S []float64
	V *mat.Dense // m×m'
}

// newProblem checks X and Y once and returns the problem they define.
func newProblem(X, Y *mat.Dense) (*problem, error) {
	n, d, m, err := checkData(X, Y)
	if err != nil {
		return nil, err
	}
	return &problem{X: X, Y: Y, n: n, d: d, m: m}, nil
}

// head is the problem on the first rows samples (a screen's subsample). The
// rows were checked with the whole data; only Y ≠ 0 can change.
func (p *problem) head(rows int) (*problem, error) {
	if rows == p.n {
		return p, nil
	}
	Y := p.Y.Slice(0, rows, 0, p.m).(*mat.Dense)
	if mat.Norm(Y, math.Inf(1)) == 0 {
		return nil, errYZero
	}
	return &problem{X: p.X.Slice(0, rows, 0, p.d).(*mat.Dense), Y: Y, n: rows, d: p.d, m: p.m}, nil
}

// svdY returns the thin SVD of Y, computing it on the first call. Callers
// must not modify the factors.
func (p *problem) svdY() (*thinSVD, error) {
	if p.svd == nil {
		u, s, v, err := linalg.ThinSVD(p.Y)
		if err != nil {
			return nil, err
		}
		p.svdCount++
		p.svd = &thinSVD{U: u, S: s, V: v}
	}
	return p.svd, nil
}
