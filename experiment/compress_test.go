package experiment

import (
	"context"
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
	res := &FashionResults{DenseAcc: 0.9, DenseParams: 100, Keeps: []float64{0.1, 0.5}, Runs: []FashionRun{
		{Method: "svd", Keep: 0.1, Accuracy: 0.8, Kept: 0.1}, {Method: "svd", Keep: 0.5, Accuracy: 0.89, Kept: 0.5},
		{Method: "data --sequential", Keep: 0.1, Accuracy: 0.88, Kept: 0.1}, {Method: "data --sequential", Keep: 0.5, Accuracy: 0.895, Kept: 0.5},
	}}
	rep := fashionReport(res, []fashionMethod{{"svd", "svd", false}, {"data --sequential", "data", true}})
	if len(rep.Rows) != 2 || rep.Rows[1][1] != "0.8800" {
		t.Fatalf("rows %v", rep.Rows)
	}
	found := false
	for _, n := range rep.Notes {
		found = found || n == "sequential data-driven is at least as accurate as truncated SVD and ASVD at every budget"
	}
	if !found {
		t.Fatalf("notes %v", rep.Notes)
	}
}
