package twolayer

import (
	"context"
	"testing"

	"github.com/relurec/relurec/synth"
)

// The zero-set start finds every unit's row exactly (to rounding, not to a
// statistical error) from zeroSetRows samples, with no moments: the units'
// activations are the sparsest directions of col(Y).
func TestZeroSetStartExactRows(t *testing.T) {
	for _, cfg := range []synth.TwoLayerConfig{
		{D: 12, K: 4, M: 6, CondV: 2},
		{D: 40, K: 30, M: 30, CondV: 3},
	} {
		in := newInstance(t, 7, cfg, zeroSetFloor(cfg.D, cfg.K), nil, synth.Noise{})
		p, err := newProblem(in.X, in.Y)
		if err != nil {
			t.Fatal(err)
		}
		st, err := zeroSetStart(context.Background(), p, Options{Seed: 3}.withDefaults())
		if err != nil {
			t.Fatal(err)
		}
		if got := len(st.zeroSet.found); got != cfg.K {
			t.Fatalf("%+v: found %d of %d units in %d starts", cfg, got, cfg.K, st.zeroSet.tries)
		}
		if a := worstAngle(in.V, st.V); a > 1e-7 { // acos resolves angles down to ~1.5e-8
			t.Errorf("%+v: worst angle %.2e, want rows exact to rounding", cfg, a)
		}
	}
}

// Below the moment starts' floor (n < 200·k²) the exact route certifies
// from the zero-set start: the floor grows with k, not k².
func TestExactRouteBelowTensorFloor(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 40, K: 30, M: 30, CondV: 3}
	n := 20000 // minSamples(40, 30) = 180000
	in := newInstance(t, 11, cfg, n, nil, synth.Noise{})
	res, err := Fit(context.Background(), in.X, in.Y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Route != RouteExact || !res.Certificate.Met {
		t.Fatalf("route %s, certificate %+v; want exact and certified (%s)", res.Route, res.Certificate, res.Reason)
	}
	if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 {
		t.Errorf("weight error %.2e", e.MaxRelErr)
	}
}
