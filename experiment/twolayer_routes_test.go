package experiment

import (
	"context"
	"testing"
)

// The quick twolayer-routes run: on every instance meant for a route, auto
// takes that route and the route is exact (or, for the noisy instance,
// approximate), so `learn twolayer` without --route picks the right route,
// end to end. The one exception is orthonormal V*: auto tries the exact route from the
// parity start before the ICA screen (twolayer's exactFirst), and it
// certifies there too.
func TestRoutesQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("15 s")
	}
	rep, err := runRoutes(context.Background(), Config{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runs := rep.Results.(struct {
		Instances []routeInstance `json:"instances"`
		Routes    []string        `json:"routes"`
		Runs      []RouteRun      `json:"runs"`
	}).Runs
	want := map[string]string{"exact": "tensor+polish", "ica": "ica+polish", "fpt": "fpt", "worstcase": "worstcase-lp",
		"sparse": "rpca+tensor+polish+l1", "noisy": "tensor+signs+lsq"}
	for _, inst := range routeInstances {
		if inst.For == "none" {
			continue
		}
		for _, r := range runs {
			if r.Instance != inst.Name {
				continue
			}
			wantAuto := want[inst.For]
			if inst.For == "ica" {
				wantAuto = want["exact"]
			}
			if r.Route == "auto" && r.Ran != wantAuto {
				t.Errorf("%s: auto ran %q, want %q (%s)", inst.Name, r.Ran, wantAuto, r.Error)
			}
			if r.Route == inst.For || r.Route == "auto" {
				ok := r.Outcome == "teacher" || (inst.For == "worstcase" && r.Outcome == "other-exact") || (inst.For == "noisy" && r.Outcome == "approximate")
				if !ok {
					t.Errorf("%s, route %s: outcome %s (%s)", inst.Name, r.Route, r.Outcome, r.Error)
				}
			}
		}
	}
	if len(rep.Rows) != len(routeInstances) || len(rep.Series) != len(routeNames) {
		t.Errorf("%d rows, %d series", len(rep.Rows), len(rep.Series))
	}
}
