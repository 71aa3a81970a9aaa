package experiment

import (
	"context"
	"math"
	"strings"
	"testing"
)

func TestCompressRateQuick(t *testing.T) {
	rep, err := runCompressRate(context.Background(), Config{Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results.(*RateResults)
	if res.Slope == nil || *res.Slope > -0.8 || *res.Slope < -1.2 {
		t.Fatalf("slope %v, Theorem 3.1 predicts -1", res.Slope)
	}
	for i, r := range res.RatioToDoF {
		if r < 0.5 || r > 2 {
			t.Fatalf("d1=%d: error %.2f× the degrees-of-freedom level", res.Grid[i], r)
		}
	}
	if len(rep.Rows) != 3 || len(rep.Series) != 4 {
		t.Fatalf("report has %d rows and %d series", len(rep.Rows), len(rep.Series))
	}
}

func TestFashionReportVerdicts(t *testing.T) {
	res := &FashionResults{DenseParams: 100, Models: []FashionModel{{Seed: 1, Accuracy: 0.9}}, Keeps: []float64{0.1, 0.5}, Runs: []FashionRun{
		{Method: "svd", Keep: 0.1, Accuracy: 0.8, Kept: 0.1}, {Method: "svd", Keep: 0.5, Accuracy: 0.89, Kept: 0.5},
		{Method: "data --sequential", Keep: 0.1, Accuracy: 0.88, Kept: 0.1}, {Method: "data --sequential", Keep: 0.5, Accuracy: 0.895, Kept: 0.5},
	}}
	rep := fashionReport(res, []fashionMethod{{label: "svd", name: "svd", seq: false}, {label: "data --sequential", name: "data", seq: true}})
	if len(rep.Rows) != 2 || rep.Rows[1][1] != "0.8800" {
		t.Fatalf("rows %v", rep.Rows)
	}
	if !hasNote(rep, "sequential data-driven is at least as accurate as truncated SVD and ASVD at every budget") {
		t.Fatalf("notes %v", rep.Notes)
	}
	if len(rep.Tables) != 2 || len(rep.Tables[0].Rows) != 2 {
		t.Fatalf("tables %v", rep.Tables)
	}
}

// With several models the table and the verdicts use the means: svd wins
// on the first model at keep 0.5 and loses on average.
func TestFashionReportMeansOverSeeds(t *testing.T) {
	res := &FashionResults{DenseParams: 100, Models: []FashionModel{{Seed: 1, Accuracy: 0.9}, {Seed: 2, Accuracy: 0.8}}, Keeps: []float64{0.5}, Runs: []FashionRun{
		{Seed: 1, Method: "svd", Keep: 0.5, Accuracy: 0.89, Kept: 0.5, Agreement: 0.9}, {Seed: 2, Method: "svd", Keep: 0.5, Accuracy: 0.70, Kept: 0.5, Agreement: 0.8},
		{Seed: 1, Method: "data --sequential", Keep: 0.5, Accuracy: 0.88, Kept: 0.5, Agreement: 1}, {Seed: 2, Method: "data --sequential", Keep: 0.5, Accuracy: 0.79, Kept: 0.5, Agreement: 0.98},
	}}
	rep := fashionReport(res, []fashionMethod{{label: "svd", name: "svd", seq: false}, {label: "data --sequential", name: "data", seq: true}})
	if rep.Rows[0][1] != "0.7950" || rep.Rows[1][1] != "0.8350" {
		t.Fatalf("rows %v, want the means 0.7950 and 0.8350", rep.Rows)
	}
	if rep.Tables[0].Rows[1][1] != "0.9900" {
		t.Fatalf("agreement rows %v", rep.Tables[0].Rows)
	}
	if !hasNote(rep, "keep 0.5: sequential data-driven -1.50 points (dense 0.8500 → 0.8350)") ||
		!hasNote(rep, "sequential data-driven is at least as accurate as truncated SVD and ASVD at every budget") {
		t.Fatalf("notes %v", rep.Notes)
	}
	if s := rep.Series[0]; len(s.Lo) != 1 || s.Lo[0] != 0.70 || s.Hi[0] != 0.89 {
		t.Fatalf("svd series band %v–%v, want the min and max over models", s.Lo, s.Hi)
	}
}

// The paired counts are pooled over models and named in the verdict.
func TestFashionPairedPooled(t *testing.T) {
	res := &FashionResults{DenseParams: 100, Models: []FashionModel{{Seed: 1, Accuracy: 0.9}, {Seed: 2, Accuracy: 0.9}}, Keeps: []float64{0.5}, Runs: []FashionRun{
		{Seed: 1, Method: "asvd", Keep: 0.5, Accuracy: 0.75, Kept: 0.5}, {Seed: 2, Method: "asvd", Keep: 0.5, Accuracy: 0.75, Kept: 0.5},
		{Seed: 1, Method: "data --sequential", Keep: 0.5, Accuracy: 0.5, Kept: 0.5}, {Seed: 2, Method: "data --sequential", Keep: 0.5, Accuracy: 0.75, Kept: 0.5},
	}}
	// Model 1: asvd right on images 0, 1, 2, sequential on 0, 3; model 2:
	// both right on the same three images.
	res.addPaired(map[string][]bool{"asvd0.5": {true, true, true, false}, "data --sequential0.5": {true, false, false, true}}, res.Keeps)
	res.addPaired(map[string][]bool{"asvd0.5": {true, true, true, false}, "data --sequential0.5": {true, true, true, false}}, res.Keeps)
	p := res.paired(0.5, "asvd")
	if p == nil || p.OnlySequential != 1 || p.OnlyOther != 2 || p.McNemarP != 1 || res.paired(0.5, "svd") != nil {
		t.Fatalf("paired %+v", res.Paired)
	}
	rep := fashionReport(res, []fashionMethod{{label: "asvd", name: "asvd", seq: false}, {label: "data --sequential", name: "data", seq: true}})
	if !hasNote(rep, "keep 0.5: asvd (0.7500) beats sequential data-driven (0.6250): 2 test images only it gets right against 1, McNemar's exact p = 1") {
		t.Fatalf("notes %v", rep.Notes)
	}
	if got := rep.Tables[2].Rows[1][1]; got != "1 / 2, p = 1" {
		t.Fatalf("paired table cell %q", got)
	}
}

func TestFormatP(t *testing.T) {
	if formatP(0) != "< 1e-300" || formatP(0.0154) != "= 0.015" || formatP(1) != "= 1" {
		t.Fatal(formatP(0), formatP(0.0154), formatP(1))
	}
}

func hasNote(rep *Report, note string) bool {
	for _, n := range rep.Notes {
		if n == note {
			return true
		}
	}
	return false
}

// compress-allocation's results compare its reference (here the sensitivity
// allocation) with each other allocation.
func TestFashionReportOtherReference(t *testing.T) {
	res := &FashionResults{DenseParams: 100, Models: []FashionModel{{Seed: 1, Accuracy: 0.9}}, Keeps: []float64{0.05}, Reference: "sensitivity", Baselines: []string{"global"}, Runs: []FashionRun{
		{Method: "global", Keep: 0.05, Accuracy: 0.5, Kept: 0.05}, {Method: "sensitivity", Keep: 0.05, Accuracy: 0.75, Kept: 0.05},
	}}
	res.addPaired(map[string][]bool{"global0.05": {true, false, false, true}, "sensitivity0.05": {true, true, true, false}}, res.Keeps)
	p := res.paired(0.05, "global")
	if p == nil || p.OnlySequential != 2 || p.OnlyOther != 1 {
		t.Fatalf("paired %+v", res.Paired)
	}
	rep := fashionReport(res, []fashionMethod{{label: "global", name: "data", seq: true, alloc: "global"}, {label: "sensitivity", name: "data", seq: true, alloc: "sensitivity"}})
	if !hasNote(rep, "keep 0.05: sensitivity -15.00 points (dense 0.9000 → 0.7500)") ||
		!hasNote(rep, "sensitivity is at least as accurate as global at every budget") {
		t.Fatalf("notes %v", rep.Notes)
	}
	if got := rep.Tables[2].Rows[0][1]; got != "2 / 1, p = 1" {
		t.Fatalf("paired table cell %q", got)
	}
}

// Fidelity without fine-tuning: the report carries agreement and logit-error
// figures per method and a per-layer table of held-out pre-activation errors
// (means over models; a failed run leaves "–" in its layer rows).
func TestFashionReportFidelity(t *testing.T) {
	res := &FashionResults{DenseParams: 100, Models: []FashionModel{{Seed: 1, Accuracy: 0.9}, {Seed: 2, Accuracy: 0.9}}, Keeps: []float64{0.1, 0.5}, Runs: []FashionRun{
		{Seed: 1, Method: "svd", Keep: 0.1, Error: "failed"}, {Seed: 2, Method: "svd", Keep: 0.1, Error: "failed"},
		{Seed: 1, Method: "svd", Keep: 0.5, Kept: 0.5, Agreement: 0.9, LogitError: 0.2, LayerErrors: []float64{0.1, 0.3}},
		{Seed: 2, Method: "svd", Keep: 0.5, Kept: 0.5, Agreement: 0.8, LogitError: 0.4, LayerErrors: []float64{0.3, 0.5}},
	}}
	rep := fashionReport(res, []fashionMethod{{label: "svd", name: "svd", seq: false}})
	if len(rep.Figures) != 2 || rep.Figures[0].File != "agreement.png" || rep.Figures[1].File != "logit-error.png" || !rep.Figures[1].Plot.LogY {
		t.Fatalf("figures %+v", rep.Figures)
	}
	if s := rep.Figures[1].Series[0]; len(s.Y) != 1 || math.Abs(s.Y[0]-0.3) > 1e-15 || s.X[0] != 0.5 {
		t.Fatalf("logit-error series %+v, want the mean 0.3 at kept 0.5", s)
	}
	var layers *Table
	for i := range rep.Tables {
		if strings.HasPrefix(rep.Tables[i].Title, "Per-layer") {
			layers = &rep.Tables[i]
		}
	}
	if layers == nil || len(layers.Rows) != 2 {
		t.Fatalf("per-layer table %+v", layers)
	}
	if r := layers.Rows[1]; r[0] != "svd, layer 1" || r[1] != "–" || r[2] != "0.4000" {
		t.Fatalf("layer 1 row %v, want [svd, layer 1 – 0.4000]", r)
	}
}
