package extract

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/rng"
	"github.com/relurec/relurec/nn"
)

// Records that are not units.
//
// Behind a coarse oracle the search can keep records that no unit of the
// oracle stands behind: a jump that held two units' parts read as one (a
// direction between theirs), or one unit read twice with its output
// column split between the copies. Such a record misleads the polish more
// than a missing unit does: the trained 784-128-10 behind the Go float32
// oracle (seed 0) searched to 133 records, ten of them more than 4e-3
// (1 − cos) from every unit and two copies of one unit; grown and polished
// with them, three units stay missing (residual 3.9e-3); without them
// (chosen with the teacher), every unit ends within 1 − cos 1e-6 and the
// residual at 3.3e-5.
//
// The oracle tells them apart directly: across a unit's hyperplane its
// slope along the unit's normal n = w/‖w‖ changes by a·‖w‖, the unit's
// output column times its norm. dropUnbent measures that change between
// the ends of a window of ±bentWindow along n at bentPoints random points
// of each record's hyperplane (four queries each) and drops the records
// whose median change, projected on a, is less than half of a·‖w‖. On the
// 784-128-10 above, every record within 1 − cos 1e-6 of a unit keeps at
// least 0.7 of its change; the two copies and eight of the ten records off
// every unit keep at most 0.28. The other two are kept: one 4e-3 off a
// unit keeps 0.55, one 7e-3 off a unit the search otherwise missed keeps
// all of it, and after the growth and the polish every unit is within
// 1 − cos 1e-6 (residual 5.2e-2 → 2.2e-7).

// bentPoints, bentWindow and bentStep are dropUnbent's measurement: the
// points per record, the window's half-width along the normal (in the
// standard Gaussian queries' scale: it has to hold the kink of a record
// whose hyperplane is a few thousandths off the unit's at a random point,
// and rarely another unit's), and the difference step of the slopes at its
// ends.
const (
	bentPoints = 9
	bentWindow = 0.1
	bentStep   = 1e-2
)

// dropUnbent returns net without the records at whose hyperplane the
// oracle's slope does not change as the record predicts (see above), and
// how many it dropped.
func (e *extractor) dropUnbent(ctx context.Context, net *nn.Depth2) (*nn.Depth2, int, error) {
	m, d, p := net.Hidden(), net.In(), net.Out()
	r := rng.New(e.opt.Seed ^ 0x6a09e667f3bcc909)
	X := mat.NewDense(4*bentPoints*m, d, nil)
	offsets := [4]float64{-bentWindow - bentStep, -bentWindow, bentWindow, bentWindow + bentStep}
	g := make([]float64, d)
	for j := 0; j < m; j++ {
		w := net.W.RawRowView(j)
		nw := math.Sqrt(dotf(w, w))
		for k := 0; k < bentPoints; k++ {
			for i := range g {
				g[i] = r.NormFloat64()
			}
			// The point of the hyperplane nearest g, then the window along n.
			s := (dotf(w, g) + net.B[j]) / (nw * nw)
			for q, t := range offsets {
				row := X.RawRowView(4*(j*bentPoints+k) + q)
				for i := range row {
					row[i] = g[i] - s*w[i] + t*w[i]/nw
				}
			}
		}
	}
	Y, err := e.o.query(ctx, X)
	if err != nil {
		return net, 0, err
	}
	e.diag.QueriesRefine += 4 * bentPoints * m
	var keep []int
	change := make([]float64, bentPoints)
	for j := 0; j < m; j++ {
		a := mat.Col(nil, j, net.A)
		w := net.W.RawRowView(j)
		want := dotf(a, a) * math.Sqrt(dotf(w, w))
		for k := range change {
			r0 := 4 * (j*bentPoints + k)
			s := 0.0
			for o := 0; o < p; o++ {
				left := (Y.At(r0+1, o) - Y.At(r0, o)) / bentStep
				right := (Y.At(r0+3, o) - Y.At(r0+2, o)) / bentStep
				s += (right - left) * a[o]
			}
			change[k] = s / want
		}
		if median(change) >= 0.5 {
			keep = append(keep, j)
		}
	}
	if len(keep) == 0 {
		// No record bends the oracle as it predicts: the check says more
		// about the oracle than about the records; keep them all.
		return net, 0, nil
	}
	return keepUnits(net, keep), m - len(keep), nil
}
