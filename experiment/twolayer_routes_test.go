package experiment

import (
	"context"
	"testing"

	"github.com/relurec/relurec/synth"
)

// routeWant is the route auto takes on an instance meant for route and the
// outcomes the test accepts there: the teacher, or for the worst-case route
// some exact factorization (it promises no more), or for noisy data an
// approximation.
func routeWant(inst routeInstance) (auto string, ok func(RouteRun) bool) {
	auto = map[string]string{"exact": "tensor+polish", "ica": "tensor+polish", "fpt": "fpt", "worstcase": "worstcase-lp",
		"sparse": "rpca+tensor+polish+l1", "noisy": "tensor+signs+lsq"}[inst.For]
	return auto, func(r RouteRun) bool {
		return r.Outcome == "teacher" || (inst.For == "worstcase" && r.Outcome == "other-exact") || (inst.For == "noisy" && r.Outcome == "approximate")
	}
}

// The quick twolayer-routes instances: on every instance meant for a route,
// auto takes that route and the route is exact (or, for the noisy instance,
// approximate), so `learn twolayer` without --route picks the right route,
// end to end. The one exception is orthonormal V*: auto tries the exact route
// from the parity start before the ICA screen (twolayer's exactFirst), and it
// certifies there too. The other cells of the table (each route on the
// instances it is not for) run in the slow test TestRoutesQuick and in
// `relurec experiment twolayer-routes`.
func TestRoutesOnTheirInstances(t *testing.T) {
	for ii, inst := range routeInstances {
		if inst.For == "none" {
			continue
		}
		// The instances share nothing: they run side by side.
		t.Run(inst.Name, func(t *testing.T) {
			t.Parallel()
			seed := deriveSeed(1, uint64(ii), 17)
			teacher, X, Y, err := inst.build(seed, true)
			if err != nil {
				t.Fatal(err)
			}
			wantAuto, ok := routeWant(inst)
			for _, route := range []string{"auto", inst.For} {
				r := routeOne(context.Background(), inst.Name, route, seed, teacher, X, Y)
				if route == "auto" && r.Ran != wantAuto {
					t.Errorf("auto ran %q, want %q (%s)", r.Ran, wantAuto, r.Error)
				}
				if !ok(r) {
					t.Errorf("route %s: outcome %s (%s)", r.Route, r.Outcome, r.Error)
				}
			}
		})
	}
}

// The routes table has a row per instance and a series per route, and its
// cells say what the runs did: exact with the worst error, the route auto
// chose, a failure's first clause.
func TestRoutesReportCells(t *testing.T) {
	var runs []RouteRun
	for _, inst := range routeInstances {
		for _, route := range routeNames {
			r := RouteRun{Instance: inst.Name, Route: route, Ran: "tensor+polish", Outcome: "teacher", WeightErr: 1e-12}
			if route == "fpt" {
				r = RouteRun{Instance: inst.Name, Route: route, Outcome: "failed", WeightErr: 1, Error: "bad input: fpt needs something this instance lacks entirely; more words"}
			}
			runs = append(runs, r)
		}
	}
	rep := routesReport(runs, 1)
	if len(rep.Rows) != len(routeInstances) || len(rep.Series) != len(routeNames) {
		t.Fatalf("%d rows, %d series", len(rep.Rows), len(rep.Series))
	}
	row := rep.Rows[0]
	if auto := row[2]; auto != "→ tensor+polish; exact 1/1 (1e-12)" {
		t.Errorf("auto cell %q", auto)
	}
	for i, name := range routeNames {
		if name == "fpt" && row[2+i] != "fails 1/1: fpt needs something this instance lacks entirely" {
			t.Errorf("fpt cell %q", row[2+i])
		}
	}
}

// A quick build does not change the instance's full size: the sample count
// of a Gaussian instance is the full one after a quick build too.
func TestRouteInstanceQuickLeavesFullSize(t *testing.T) {
	build := gaussianInstance(synth.TwoLayerConfig{D: 3, K: 2, M: 2}, 500, 100, synth.Noise{})
	for _, c := range []struct {
		quick bool
		rows  int
	}{{true, 100}, {false, 500}} {
		_, X, _, err := build(1, c.quick)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := X.Dims(); r != c.rows {
			t.Errorf("quick %v: %d rows, want %d", c.quick, r, c.rows)
		}
	}
}
