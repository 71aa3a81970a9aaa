package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relurec/relurec/twolayer"
)

func TestRegistry(t *testing.T) {
	e, ok := Get("twolayer-samples")
	if !ok || e.Run == nil || e.Description == "" {
		t.Fatalf("twolayer-samples not registered properly: %+v %v", e, ok)
	}
	if _, ok := Get("no-such-experiment"); ok {
		t.Fatal("Get found an unregistered name")
	}
	names := List()
	for i := 1; i < len(names); i++ {
		if names[i-1].Name >= names[i].Name {
			t.Fatalf("List not sorted: %q before %q", names[i-1].Name, names[i].Name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate Register did not panic")
		}
	}()
	Register(e)
}

func TestRunAndWriteUnknown(t *testing.T) {
	_, _, err := RunAndWrite(context.Background(), "nope", Config{OutDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "twolayer-samples") {
		t.Fatalf("want an unknown-experiment error listing the names, got %v", err)
	}
}

func TestMinMedMaxAndSlope(t *testing.T) {
	lo, med, hi := minMedMax([]float64{3, 1, 2, 10})
	if lo != 1 || med != 2.5 || hi != 10 {
		t.Fatalf("minMedMax = %v %v %v", lo, med, hi)
	}
	if _, m, _ := minMedMax([]float64{1, math.Inf(1), 2}); m != 2 {
		t.Fatalf("median with a failure = %v, want 2", m)
	}
	x := []float64{4, 5, 6}
	y := []float64{-2, -2.5, -3}
	if s := slope(x, y); s == nil || math.Abs(*s+0.5) > 1e-12 {
		t.Fatalf("slope = %v, want -0.5", s)
	}
	if slope([]float64{1}, []float64{1}) != nil {
		t.Fatal("slope of one point should be nil")
	}
	if deriveSeed(1, 100, 2) == deriveSeed(1, 100, 3) || deriveSeed(1, 100, 2) == deriveSeed(2, 100, 2) {
		t.Fatal("deriveSeed streams collide")
	}
}

// checkFiles asserts results.json, table.md and plot.png in dir are well
// formed and returns the decoded results.
func checkFiles(t *testing.T, dir string, rep *Report) Results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("results.json does not decode: %v\n%s", err, b)
	}
	if res.Environment.GoVersion == "" || res.Environment.CPUs < 1 || res.Environment.Date == "" || res.Environment.Version == "" {
		t.Fatalf("environment incomplete: %+v", res.Environment)
	}
	if res.Report == nil || len(res.Report.Rows) != len(rep.Rows) || len(res.Report.Series) != len(rep.Series) {
		t.Fatalf("report not round-tripped: %+v", res.Report)
	}
	md, err := os.ReadFile(filepath.Join(dir, TableFile))
	if err != nil {
		t.Fatal(err)
	}
	mds := string(md)
	if !strings.Contains(mds, "### "+rep.Title) || !strings.Contains(mds, "relurec experiment run") {
		t.Fatalf("table.md lacks title or reproduce command:\n%s", mds)
	}
	lines := 0
	for _, l := range strings.Split(mds, "\n") {
		if strings.HasPrefix(l, "|") {
			lines++
			if got := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); got != len(rep.Columns)+1 {
				t.Fatalf("table row %q has %d bars, want %d", l, got, len(rep.Columns)+1)
			}
		}
	}
	if lines != len(rep.Rows)+2 {
		t.Fatalf("table has %d lines, want %d:\n%s", lines, len(rep.Rows)+2, mds)
	}
	f, err := os.Open(filepath.Join(dir, PlotFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot.png does not decode: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 200 || r.Dy() < 200 {
		t.Fatalf("plot.png is %v", r)
	}
	return res
}

func TestWriteSyntheticReport(t *testing.T) {
	rep := &Report{
		Title:   "synthetic",
		Columns: []string{"n", "err | note"},
		Rows:    [][]string{{"100", "1e-3 | a"}, {"1000", "3e-4"}},
		Plot:    PlotSpec{XLabel: "n", YLabel: "err", LogX: true, LogY: true},
		Series: []Series{
			{Name: "a", X: []float64{100, 1000, 10000}, Y: []float64{1e-3, 3e-4, 1e-4}, Lo: []float64{5e-4, 1e-4, 0}, Hi: []float64{2e-3, 5e-4, math.Inf(1)}},
			{Name: "exact", X: []float64{100, 1000, 10000}, Y: []float64{0, 1e-15, math.NaN()}},
			{Name: "ref", X: []float64{100, 10000}, Y: []float64{1e-3, 1e-4}, Dashed: true},
		},
		Notes:   []string{"a note"},
		Results: map[string]any{"k": 1},
	}
	dir := filepath.Join(t.TempDir(), "out", "nested")
	e := Experiment{Name: "synthetic", Description: "a test", Run: func(context.Context, Config) (*Report, error) { return rep, nil }}
	paths, err := Write(e, Config{OutDir: dir, Seeds: 2, Seed: 7}, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("wrote %v", paths)
	}
	res := checkFiles(t, dir, rep)
	if res.Command != "relurec experiment run synthetic --seeds 2 --seed 7" {
		t.Fatalf("command = %q", res.Command)
	}
	if y := res.Report.Series[1].Y; !math.IsNaN(y[2]) || y[1] != 1e-15 {
		t.Fatalf("NaN did not round-trip as null: %v", y)
	}
	if !bytes.Contains(mustRead(t, filepath.Join(dir, ResultsFile)), []byte("null")) {
		t.Fatal("non-finite values should be written as null")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSamplesTiny runs twolayer-samples on a tiny grid end to end (it needs
// a working twolayer.Fit) and checks the files and the summary.
func TestSamplesTiny(t *testing.T) {
	p := samplesParams{
		D: 6, K: 2, M: 3,
		Grid: []int{4000, 8000}, QuickGrid: []int{4000},
		Seeds: 2, QuickSeeds: 1,
		NoiseLevel: 0.1, ExactTol: 1e-9,
	}
	dir := t.TempDir()
	cfg := Config{OutDir: dir, Seed: 3}
	calls := 0
	cfg.Progress = func(string, int, int) { calls++ }
	rep, err := runSamples(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if calls != len(p.Grid)*p.Seeds {
		t.Fatalf("progress called %d times, want %d", calls, len(p.Grid)*p.Seeds)
	}
	res := rep.Results.(*SamplesResults)
	if len(res.Runs) != len(p.Grid)*p.Seeds*3 || len(res.PerN) != len(p.Grid) || len(rep.Rows) != len(p.Grid) {
		t.Fatalf("got %d runs, %d summary rows", len(res.Runs), len(res.PerN))
	}
	for _, r := range res.Runs {
		if r.Error != "" {
			t.Errorf("n=%d seed=%d %s failed: %s", r.N, r.Seed, r.Case, r.Error)
		}
	}
	for _, row := range res.PerN {
		if row.Seeds != p.Seeds || row.MedianNoiseless == nil || row.MedianNoisy == nil || row.MedianRefined == nil {
			t.Errorf("summary row incomplete: %+v", row)
		}
	}
	if res.SlopeNoisy == nil || res.SlopeRefined == nil {
		t.Error("no slopes fitted over a two-point grid")
	}
	if len(rep.Series) < 3 || len(rep.Series[0].X) != len(p.Grid) {
		t.Errorf("plot series: %+v", rep.Series)
	}
	e, _ := Get("twolayer-samples")
	if _, err := Write(e, cfg, rep); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, rep)
}

func TestReliabilityOneSmall(t *testing.T) {
	run := reliabilityOne(context.Background(), reliabilityCase{Name: "tiny", D: 8, K: 3, M: 5, N: 20000, Instances: 1}, 1, 0)
	if run.Error != "" || run.Route != twolayer.RouteExact || run.MaxRelErr > 1e-9 {
		t.Fatalf("tiny reliability instance: %+v", run)
	}
}

func TestWrapWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"short title", 90, "short title"},
		{"aaa bbb ccc", 7, "aaa bbb\nccc"},
		{"a verylongword b", 4, "a\nverylongword\nb"},
		{"", 10, ""},
	} {
		if got := wrapWords(c.in, c.w); got != c.want {
			t.Errorf("wrapWords(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
	}
}

// Further figures are written next to plot.png as their own PNG files; a
// figure file that is not a plain .png base name, or is plot.png, is refused.
func TestWriteFigures(t *testing.T) {
	s := []Series{{Name: "a", X: []float64{0.1, 0.5}, Y: []float64{0.8, 0.9}}}
	rep := &Report{
		Title: "figures", Columns: []string{"x"}, Rows: [][]string{{"1"}},
		Plot: PlotSpec{XLabel: "x", YLabel: "y"}, Series: s,
		Figures: []Figure{{File: "second.png", Title: "second", Plot: PlotSpec{XLabel: "x", YLabel: "z", LogY: true}, Series: s}},
	}
	dir := t.TempDir()
	e := Experiment{Name: "figures", Description: "a test", Run: func(context.Context, Config) (*Report, error) { return rep, nil }}
	paths, err := Write(e, Config{OutDir: dir}, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 4 || filepath.Base(paths[3]) != "second.png" {
		t.Fatalf("wrote %v", paths)
	}
	f, err := os.Open(paths[3])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("second.png does not decode: %v", err)
	}
	for _, bad := range []string{"../x.png", "x.svg", PlotFile} {
		rep.Figures[0].File = bad
		if _, err := Write(e, Config{OutDir: t.TempDir()}, rep); err == nil {
			t.Errorf("figure file %q accepted", bad)
		}
	}
}
