//go:build slow

package compress

import (
	"context"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestSensitivityFashionSmall: on a small MLP trained on Fashion-MNIST, the
// sensitivity allocation's held-out logit error is within 5% of the best of
// the other allocations at every budget (sequential data-driven
// compression), and it is within budget. It skips when the data set is not
// installed.
func TestSensitivityFashionSmall(t *testing.T) {
	net, calib, test := smallFashionMLP(t, []int{784, 128, 64, 10})
	ref := net.Forward(test.X)
	for _, keep := range []float64{0.05, 0.1, 0.2} {
		errs := map[Allocation]float64{}
		for _, a := range Allocations {
			res, err := CompressMLP(context.Background(), net, calib, Options{Keep: keep, Sequential: true, Allocation: a})
			if err != nil {
				t.Fatal(err)
			}
			if res.Params > res.Budget {
				t.Fatalf("%s keep %g: %d > %d", a, keep, res.Params, res.Budget)
			}
			m, _ := res.Model.Evaluate(test.X, test.Labels)
			var ranks []int
			for _, l := range res.Layers {
				ranks = append(ranks, l.Rank)
			}
			errs[a] = diffNorm(res.Model.Forward(test.X), ref) / mat.Norm(ref, 2)
			t.Logf("keep %g %-12s ranks %v accuracy %.4f logit error %.4f", keep, a, ranks, m.Accuracy, errs[a])
		}
		for a, e := range errs {
			if a != AllocSensitivity && errs[AllocSensitivity] > 1.05*e {
				t.Errorf("keep %g: sensitivity logit error %.4f > 1.05 × %s's %.4f", keep, errs[AllocSensitivity], a, e)
			}
		}
	}
}
