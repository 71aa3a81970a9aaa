//go:build slow

package twolayer

import (
	"context"
	"testing"
	"time"

	"github.com/relurec/relurec/nn"
)

// [BJW19, Alg 2] over many seeds and sizes (cube inputs): every instance with
// rank(Y) = k is certified, and the table says how often the returned network
// differs from the teacher (under-determined data) and how long a run takes.
// go test -tags slow ./twolayer -run TestWorstCaseReliability -v
func TestWorstCaseReliability(t *testing.T) {
	for _, c := range []struct{ n, d, k, m int }{{6, 4, 2, 2}, {8, 4, 2, 2}, {30, 4, 2, 2}, {40, 4, 3, 5}, {60, 6, 3, 3}} {
		var fails, ranked, differ int
		var worst float64
		t0 := time.Now()
		for seed := uint64(1); seed <= 30; seed++ {
			in := cubeInstance(seed, c.n, c.d, c.k, c.m)
			if rankOf(t, in.Y) != c.k {
				continue
			}
			ranked++
			res, err := WorstCase(context.Background(), in.X, in.Y, WorstCaseOptions{})
			if err != nil {
				fails++
				t.Errorf("%+v seed %d: %v", c, seed, err)
				continue
			}
			worst = max(worst, res.Certificate.Residual)
			if compare(t, nn.NewTwoLayer(in.V, in.U), res.Model).MaxRelErr > 1e-6 {
				differ++
			}
		}
		t.Logf("n=%d d=%d k=%d m=%d: %d/30 seeds rank k, %d failed, worst residual %.1e, %d returned a non-teacher network, %.3f s per run",
			c.n, c.d, c.k, c.m, ranked, fails, worst, differ, time.Since(t0).Seconds()/float64(max(ranked, 1)))
	}
}
