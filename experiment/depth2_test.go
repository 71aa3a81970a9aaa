package experiment

import (
	"context"
	"testing"
)

// Tiny versions of the depth-2 experiments: they run, fill their tables,
// and the noiseless refined fits are exact.
func TestDepth2ExperimentsTiny(t *testing.T) {
	ctx := context.Background()
	rep, err := runDepth2Samples(ctx, Config{}, depth2SamplesParams{D: 5, M: 2, Grid: []int{20000, 40000}, QuickGrid: []int{20000}, Seeds: 1, QuickSeeds: 1, Noise: 0.1, ExactTol: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0][1] != "1/1" {
		t.Errorf("depth2-samples rows: %v", rep.Rows)
	}
	rep, err = runDepth2Exact(ctx, Config{Quick: true, Seeds: 1}, depth2ExactParams{D: 5, M: 2, N: 30000, QuickN: 20000, Seeds: 1, QuickSeeds: 1, Tol: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 {
		t.Errorf("depth2-exact rows: %v", rep.Rows)
	}
	rep, err = runDepth2Bias(ctx, Config{Quick: true}, depth2BiasParams{D: 4, M: 2, QuickScales: []float64{0.5, 4}, QuickN: 20000, QuickSeeds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Errorf("depth2-bias rows: %v", rep.Rows)
	}
	for _, name := range []string{"depth2-samples", "depth2-exact", "depth2-overcomplete", "depth2-bias"} {
		if _, ok := Get(name); !ok {
			t.Errorf("%s not registered", name)
		}
	}
}
