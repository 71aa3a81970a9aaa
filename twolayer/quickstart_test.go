package twolayer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

// On data far above the exact route's floor the tensor start (asked for:
// the parity start comes first by default) reads only
// the first quickStartFactor·minSamples(d, k) rows; the polish certifies on
// all of them, and the weights are exact.
func TestQuickStartCertifies(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 12, K: 3, M: 5}
	in := newInstance(t, 5, cfg, 20000, nil, synth.Noise{})
	res, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: 3, Seed: 2, Start: StartTensor})
	if err != nil {
		t.Fatal(err)
	}
	want := quickStartFactor * minSamples(cfg.D, cfg.K)
	if res.Diagnostics.StartRows != want || !res.Certificate.Met || res.Route != RouteExact {
		t.Fatalf("start rows %d (want %d), route %s, certificate %+v, warnings %q", res.Diagnostics.StartRows, want, res.Route, res.Certificate, res.Warnings)
	}
	if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 {
		t.Fatalf("weight error %.1e", e.MaxRelErr)
	}
}

// Rows sorted so that the first block holds one unit's active samples
// only: the quick start's moments are those of another distribution. The
// quick start leaves a unit uncertified (this seed), so the route starts
// again from all rows, says so in a warning, and the answer is exact.
func TestQuickStartFallsBackOnUnrepresentativeRows(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 12, K: 3, M: 5}
	in := newInstance(t, 6, cfg, 20000, nil, synth.Noise{})
	n, d := in.X.Dims()
	_, m := in.Y.Dims()
	v := in.V.RawRowView(0)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmpFloat(-dot(in.X.RawRowView(a), v), -dot(in.X.RawRowView(b), v))
	})
	X, Y := mat.NewDense(n, d, nil), mat.NewDense(n, m, nil)
	for i, q := range idx {
		X.SetRow(i, in.X.RawRowView(q))
		Y.SetRow(i, in.Y.RawRowView(q))
	}
	res, err := Fit(context.Background(), X, Y, Options{Hidden: 3, Seed: 2, Route: UseExact, Start: StartTensor})
	if err != nil {
		t.Fatal(err)
	}
	again := false
	for _, w := range res.Warnings {
		again = again || strings.Contains(w.String(), "started again with the tensor start from all")
	}
	t.Logf("start rows %d, second start %v, warnings %q", res.Diagnostics.StartRows, again, res.Warnings)
	if !again || res.Diagnostics.StartRows != n {
		t.Fatalf("start rows %d, second-start warning %v: want a second start from all %d rows", res.Diagnostics.StartRows, again, n)
	}
	if !res.Certificate.Met {
		t.Fatalf("certificate %+v", res.Certificate)
	}
	if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 {
		t.Fatalf("weight error %.1e", e.MaxRelErr)
	}
}
