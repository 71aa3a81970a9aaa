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

	svd *linalg.TallSVD
	// svdCount counts the SVDs of Y computed for this problem; a test holds
	// Fit's automatic route to one.
	svdCount int
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
// must not modify the factors. It holds S and V only: the n×m left factor
// would cost as much as Y, and the routes need just its first k columns
// (UCols), once.
func (p *problem) svdY() (*linalg.TallSVD, error) {
	if p.svd == nil {
		svd, err := linalg.NewTallSVD(p.Y)
		if err != nil {
			return nil, err
		}
		p.svdCount++
		p.svd = svd
	}
	return p.svd, nil
}
