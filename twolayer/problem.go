package twolayer

import (
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
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
	// roundoff is the unit roundoff of the data (certify.Roundoff), and
	// rankTol the relative singular value below which Y counts as exactly
	// low-rank at that precision (rankTolFor).
	roundoff, rankTol float64

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
	u := certify.Roundoff(X, Y)
	return &problem{X: X, Y: Y, n: n, d: d, m: m, roundoff: u, rankTol: rankTolFor(u)}, nil
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
