package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/twolayer"
)

// routeInstance is one family of the twolayer-routes experiment: the
// setting one of Bakshi et al.'s routes is for.
type routeInstance struct {
	Name string `json:"name"`
	// For names the route the instance is meant for.
	For  string `json:"for"`
	What string `json:"what"`
	// build draws (teacher, X, Y) from a seed; quick selects a smaller size.
	build func(seed uint64, quick bool) (*nn.MLP, *mat.Dense, *mat.Dense, error)
}

// uniformInputs draws X with i.i.d. entries uniform on [−√3, √3] (unit
// variance, not Gaussian).
func uniformInputs(n, d int, seed uint64) *mat.Dense {
	rng := synth.NewRand(seed)
	X := mat.NewDense(n, d, nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = math.Sqrt(3) * (2*rng.Float64() - 1)
	}
	return X
}

func gaussianInstance(cfg synth.TwoLayerConfig, n, quickN int, noise synth.Noise) func(uint64, bool) (*nn.MLP, *mat.Dense, *mat.Dense, error) {
	return func(seed uint64, quick bool) (*nn.MLP, *mat.Dense, *mat.Dense, error) {
		rows := n
		if quick {
			rows = quickN
		}
		rng := synth.NewRand(seed)
		teacher, err := synth.TwoLayerTeacher(cfg, rng)
		if err != nil {
			return nil, nil, nil, err
		}
		X, err := synth.GaussianInputs(rows, cfg.D, nil, rng)
		if err != nil {
			return nil, nil, nil, err
		}
		Y, _, err := synth.TwoLayerData(teacher, X, noise, rng)
		return teacher, X, Y, err
	}
}

var routeInstances = []routeInstance{
	{Name: "generic", For: "exact", What: "Gaussian X, generic V*, d=20, k=5, m=8, n=1e5, noiseless",
		build: gaussianInstance(synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100_000, 20_000, synth.Noise{})},
	{Name: "orthonormal", For: "ica", What: "Gaussian X, orthonormal V*, d=20, k=6, m=10, n=1e5, noiseless",
		build: gaussianInstance(synth.TwoLayerConfig{D: 20, K: 6, M: 10, CondV: 1}, 100_000, 20_000, synth.Noise{})},
	{Name: "rank-deficient U", For: "fpt", What: "Gaussian X, orthonormal V*, d=10, k=4, m=2 (columns of U* at four angles incl. u and −u), n=4·d·2^k=640",
		build: func(seed uint64, _ bool) (*nn.MLP, *mat.Dense, *mat.Dense, error) {
			rng := synth.NewRand(seed)
			U, err := synth.PlanarOutputWeights([]float64{0.3, 1.4, 2.6, 0.3 + math.Pi}, nil)
			if err != nil {
				return nil, nil, nil, err
			}
			teacher, err := synth.OrthonormalTeacher(10, U, rng)
			if err != nil {
				return nil, nil, nil, err
			}
			X, err := synth.GaussianInputs(twolayer.FPTMinSamples(10, 4), 10, nil, rng)
			if err != nil {
				return nil, nil, nil, err
			}
			return teacher, X, teacher.Forward(X), nil
		}},
	{Name: "tiny cube", For: "worstcase", What: "X uniform on a cube (not Gaussian), d=4, k=2, m=3, n=30",
		build: func(seed uint64, _ bool) (*nn.MLP, *mat.Dense, *mat.Dense, error) {
			teacher, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: 4, K: 2, M: 3}, synth.NewRand(seed))
			if err != nil {
				return nil, nil, nil, err
			}
			X := uniformInputs(30, 4, seed+1000)
			return teacher, X, teacher.Forward(X), nil
		}},
	{Name: "large cube", For: "none", What: "X uniform on a cube (not Gaussian), d=10, k=3, m=5, n=5e4: no route has a guarantee",
		build: func(seed uint64, quick bool) (*nn.MLP, *mat.Dense, *mat.Dense, error) {
			n := 50_000
			if quick {
				n = 10_000
			}
			teacher, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: 10, K: 3, M: 5}, synth.NewRand(seed))
			if err != nil {
				return nil, nil, nil, err
			}
			X := uniformInputs(n, 10, seed+1000)
			return teacher, X, teacher.Forward(X), nil
		}},
	{Name: "sparse corruption", For: "sparse", What: "Gaussian X, d=10, k=3, m=200, U* with orthonormal incoherent columns, n=5000, 5% of the entries of Y corrupted by adding ±[5, 10]·rms(Y)",
		build: func(seed uint64, _ bool) (*nn.MLP, *mat.Dense, *mat.Dense, error) {
			rng := synth.NewRand(seed)
			base, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: 10, K: 3, M: 3, CondV: 2}, rng)
			if err != nil {
				return nil, nil, nil, err
			}
			U, _, err := synth.IncoherentOrthonormal(200, 3, 0, rng)
			if err != nil {
				return nil, nil, nil, err
			}
			teacher := nn.NewTwoLayer(base.Layers[0].Weight, U)
			X, err := synth.GaussianInputs(5000, 10, nil, rng)
			if err != nil {
				return nil, nil, nil, err
			}
			Yc, _, err := synth.CorruptSparse(teacher.Forward(X), synth.SparseCorruption{Frac: 0.05}, rng)
			return teacher, X, Yc, err
		}},
	{Name: "noisy", For: "noisy", What: "Gaussian X, generic V*, d=20, k=5, m=8, n=1e5, Gaussian noise at 10% of the output RMS",
		build: gaussianInstance(synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100_000, 20_000, synth.Noise{Kind: synth.NoiseGaussian, Level: 0.1})},
}

// routeNames are the routes run on every instance, "auto" first.
var routeNames = []string{"auto", "exact", "noisy", "ica", "fpt", "worstcase", "sparse"}

// RouteRun is one fit of the twolayer-routes experiment.
type RouteRun struct {
	Instance  string  `json:"instance"`
	Seed      uint64  `json:"seed"`
	Route     string  `json:"route"`   // as requested
	Ran       string  `json:"ran"`     // Result.Route (auto's choice)
	Outcome   string  `json:"outcome"` // teacher, other-exact, approximate, failed
	WeightErr float64 `json:"weight_err"`
	Residual  float64 `json:"residual"`
	Seconds   float64 `json:"seconds"`
	Error     string  `json:"error,omitempty"`
}

func init() {
	var b strings.Builder
	for _, in := range routeInstances {
		fmt.Fprintf(&b, " %s (%s);", in.Name, in.What)
	}
	Register(Experiment{
		Name: "twolayer-routes",
		Description: "Every route of the two-layer learner (Bakshi–Jayaram–Woodruff) on the instance each one is for, and on the others, " +
			"to show where each fails and which route Fit's automatic choice takes. Instances:" + strings.TrimSuffix(b.String(), ";") +
			". Routes: " + strings.Join(routeNames, ", ") + "; 3 seeds (1 with --quick, at smaller n).",
		Run: runRoutes,
	})
}

func runRoutes(ctx context.Context, cfg Config) (*Report, error) {
	seeds := cfg.seeds(3, 1)
	total := seeds * len(routeInstances) * len(routeNames)
	var runs []RouteRun
	done := 0
	for ii, inst := range routeInstances {
		for s := 0; s < seeds; s++ {
			seed := deriveSeed(cfg.Seed+uint64(s), uint64(ii), 17)
			teacher, X, Y, err := inst.build(seed, cfg.Quick)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", inst.Name, err)
			}
			for _, route := range routeNames {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				runs = append(runs, routeOne(ctx, inst.Name, route, seed, teacher, X, Y))
				done++
				cfg.progress("twolayer-routes", done, total)
			}
		}
	}
	return routesReport(runs, seeds), nil
}

func routeOne(ctx context.Context, instance, route string, seed uint64, teacher *nn.MLP, X, Y *mat.Dense) RouteRun {
	run := RouteRun{Instance: instance, Seed: seed, Route: route, WeightErr: math.Inf(1), Residual: math.Inf(1)}
	began := time.Now()
	res, err := twolayer.Fit(ctx, X, Y, twolayer.Options{Route: twolayer.Route(route), Seed: seed, Refine: true})
	run.Seconds = time.Since(began).Seconds()
	if err != nil {
		run.Outcome, run.Error = "failed", err.Error()
		if errors.Is(err, twolayer.ErrWorkLimit) {
			run.Outcome = "refused"
		}
		return run
	}
	run.Ran, run.Residual = res.Route, res.Certificate.Residual
	if e, err := metrics.CompareTwoLayer(teacher, res.Model); err == nil {
		run.WeightErr = e.MaxRelErr
	}
	switch {
	case res.Certificate.Met && run.WeightErr <= 1e-9:
		run.Outcome = "teacher"
	case res.Certificate.Met:
		run.Outcome = "other-exact"
	default:
		run.Outcome = "approximate"
	}
	return run
}

// routeCell summarises the runs of one route on one instance: how many
// recovered the teacher exactly, the worst error, and the typical failure.
func routeCell(runs []RouteRun) string {
	counts := map[string]int{}
	worst, worstRes := 0.0, 0.0
	var errMsg string
	ran := map[string]int{}
	for _, r := range runs {
		counts[r.Outcome]++
		if r.Outcome != "failed" && r.Outcome != "refused" {
			worst = math.Max(worst, r.WeightErr)
			worstRes = math.Max(worstRes, r.Residual)
			ran[r.Ran]++
		} else if errMsg == "" {
			errMsg = shortError(r.Error)
		}
	}
	n := len(runs)
	var parts []string
	if runs[0].Route == "auto" {
		var names []string
		for _, name := range sortedKeys(ran) {
			names = append(names, name)
		}
		if len(names) > 0 {
			parts = append(parts, "→ "+strings.Join(names, ", "))
		}
	}
	switch {
	case counts["teacher"] == n:
		parts = append(parts, fmt.Sprintf("exact %d/%d (%.0e)", n, n, worst))
	case counts["other-exact"] > 0 && counts["teacher"]+counts["other-exact"] == n:
		parts = append(parts, fmt.Sprintf("exact fit %d/%d (res %.0e), teacher %d/%d", n, n, worstRes, counts["teacher"], n))
	case counts["teacher"] > 0:
		parts = append(parts, fmt.Sprintf("exact %d/%d (%.0e)", counts["teacher"], n, worst))
	case counts["approximate"] > 0:
		parts = append(parts, fmt.Sprintf("approx. %d/%d (err %.1e)", counts["approximate"]+counts["teacher"], n, worst))
	}
	if c := counts["failed"] + counts["refused"]; c > 0 {
		verb := "fails"
		if counts["refused"] == c {
			verb = "refuses"
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d: %s", verb, c, n, errMsg))
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string]int) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

// shortError keeps the first clause of an error message, for a table cell.
func shortError(msg string) string {
	msg = strings.TrimPrefix(msg, "bad input: ")
	msg = strings.TrimPrefix(msg, "no certified exact solution: ")
	if i := strings.IndexAny(msg, ";("); i > 20 {
		msg = msg[:i]
	}
	if r := []rune(msg); len(r) > 90 {
		msg = string(r[:90]) + "…"
	}
	return strings.TrimSpace(msg)
}

func routesReport(runs []RouteRun, seeds int) *Report {
	rep := &Report{
		Title:   "Two-layer routes: each on its own instance and on the others",
		Columns: append([]string{"instance", "meant for"}, routeNames...),
		Plot:    PlotSpec{XLabel: "instance (see table order)", YLabel: "worst max relative weight error (1 = failed)", LogY: true},
	}
	series := map[string][]float64{}
	var x []float64
	for ii, inst := range routeInstances {
		row := []string{inst.Name, inst.For}
		x = append(x, float64(ii+1))
		for _, route := range routeNames {
			var cell []RouteRun
			worst := 0.0
			for _, r := range runs {
				if r.Instance == inst.Name && r.Route == route {
					cell = append(cell, r)
					worst = math.Max(worst, math.Min(r.WeightErr, 1))
				}
			}
			row = append(row, routeCell(cell))
			series[route] = append(series[route], worst)
		}
		rep.Rows = append(rep.Rows, row)
	}
	for _, route := range routeNames {
		rep.Series = append(rep.Series, Series{Name: route, X: x, Y: series[route]})
	}
	rep.Notes = []string{
		fmt.Sprintf("%d seeds per instance. \"exact k/n (e)\": the route certified its answer and recovered the teacher up to permutation and positive scaling, worst max relative weight error e. "+
			"\"exact fit\": certified (the network reproduces Y) but not the teacher (the worst-case route promises some exact factorization only). "+
			"\"approx.\": an uncertified estimate (the noisy route, refined). \"fails\"/\"refuses\": the error message's first clause. "+
			"\"→ route\" is what auto chose. Every fit uses Options{Route, Seed, Refine: true}.", seeds),
	}
	for _, inst := range routeInstances {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %s.", inst.Name, inst.What))
	}
	rep.Results = struct {
		Instances []routeInstance `json:"instances"`
		Routes    []string        `json:"routes"`
		Runs      []RouteRun      `json:"runs"`
	}{routeInstances, routeNames, runs}
	return rep
}
