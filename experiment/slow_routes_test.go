//go:build slow

package experiment

import (
	"context"
	"testing"
)

// The whole quick twolayer-routes table: every route on every instance
// runs to an outcome, and the cells TestRoutesOnTheirInstances checks hold
// in it too.
func TestRoutesQuick(t *testing.T) {
	rep, err := runRoutes(context.Background(), Config{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runs := rep.Results.(struct {
		Instances []routeInstance `json:"instances"`
		Routes    []string        `json:"routes"`
		Runs      []RouteRun      `json:"runs"`
	}).Runs
	for _, inst := range routeInstances {
		if inst.For == "none" {
			continue
		}
		wantAuto, ok := routeWant(inst)
		for _, r := range runs {
			if r.Instance != inst.Name {
				continue
			}
			if r.Route == "auto" && r.Ran != wantAuto {
				t.Errorf("%s: auto ran %q, want %q (%s)", inst.Name, r.Ran, wantAuto, r.Error)
			}
			if (r.Route == inst.For || r.Route == "auto") && !ok(r) {
				t.Errorf("%s, route %s: outcome %s (%s)", inst.Name, r.Route, r.Outcome, r.Error)
			}
		}
	}
	if len(runs) != len(routeInstances)*len(routeNames) || len(rep.Rows) != len(routeInstances) || len(rep.Series) != len(routeNames) {
		t.Errorf("%d runs, %d rows, %d series", len(runs), len(rep.Rows), len(rep.Series))
	}
}
