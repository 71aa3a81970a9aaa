package experiment

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestRobustExperimentQuick(t *testing.T) {
	dir := t.TempDir()
	rep, files, err := RunAndWrite(context.Background(), "robust-vs-outliers", Config{OutDir: dir, Quick: true, Seeds: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || len(rep.Rows) != 5 || len(rep.Series) != 8 {
		t.Fatalf("files %v, %d rows, %d series", files, len(rep.Rows), len(rep.Series))
	}
	res := rep.Results.(*RobustResults)
	first, last := res.Rows[0], res.Rows[len(res.Rows)-1]
	if last.Oracle > 3*first.Oracle+0.05 || last.OLS < 100*first.OLS {
		t.Errorf("Huber should stay bounded and OLS grow: %+v … %+v", first, last)
	}
	for _, r := range res.Rows {
		// Knowing b beats treating ReLU(Ac + b) − μAc as noise.
		if !(r.KnownBias < r.MAD) {
			t.Errorf("E=%g: known-bias error %.3g not below Huber's %.3g", r.E, r.KnownBias, r.MAD)
		}
		if r.Certified != r.Trials {
			t.Errorf("E=%g: %d/%d certified", r.E, r.Certified, r.Trials)
		}
	}
}

func TestColspaceOneAndReport(t *testing.T) {
	run, err := colspaceOne(context.Background(), 30, 2, 120, 0.5, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !(run.ALSRestr < 1e-3) || !(run.ALS < run.N2) || math.IsNaN(run.ADMM) || !(run.ADMMvsALS < 0.05) {
		t.Errorf("run %+v", run)
	}
	rep := colspaceReport(&ColspaceResults{D: 30, K: 2, Means: []float64{0.5}, Grid: []int{120}, Seeds: []uint64{1}, Runs: []ColspaceRun{run}})
	if len(rep.Rows) != 1 || !strings.Contains(MarkdownTable(rep.Columns, rep.Rows), "N(0.5,1)") {
		t.Errorf("report rows %v", rep.Rows)
	}
}

func TestColspaceRunJSON(t *testing.T) {
	b, err := json.Marshal(ColspaceRun{N: 5, ADMM: math.NaN(), ALS: 0.1})
	if err != nil || !strings.Contains(string(b), `"admm":null`) || !strings.Contains(string(b), `"als":0.1`) {
		t.Fatalf("%s %v", b, err)
	}
}
