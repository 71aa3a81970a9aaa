package twolayer

import (
	"context"
	"testing"

	"github.com/relurec/relurec/synth"
)

// TestAutoRouteFactorsYOnce: the automatic route's rank screen, ICA screen
// and tensor start read one SVD of Y (issue: Y was factored up to four times
// on the auto route).
func TestAutoRouteFactorsYOnce(t *testing.T) {
	for _, n := range []int{15000, 30000} { // below and above the ICA screen's block
		in := newInstance(t, 1, synth.TwoLayerConfig{D: 10, K: 3, M: 5, CondV: 2}, n, nil, synth.Noise{})
		p, err := newProblem(in.X, in.Y)
		if err != nil {
			t.Fatal(err)
		}
		opt := Options{Seed: 1}.withDefaults()
		res, err := fitAuto(context.Background(), p, opt)
		if err != nil {
			t.Fatal(err)
		}
		if res.Route != RouteExact || !res.Certificate.Met {
			t.Fatalf("n=%d: route %s (%s), certificate %+v; want an exact answer", n, res.Route, res.Reason, res.Certificate)
		}
		if p.svdCount != 1 {
			t.Errorf("n=%d: the SVD of Y was computed %d times on the auto route, want 1", n, p.svdCount)
		}
	}
}
