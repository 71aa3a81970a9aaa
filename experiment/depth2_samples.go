package experiment

import (
	"context"
	"fmt"
	"math"

	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/synth"
)

// ---------------------------------------------------------------------
// depth2-samples: parameter error vs n for ℓ = 1.

type depth2SamplesParams struct {
	D, M              int
	Grid, QuickGrid   []int
	Seeds, QuickSeeds int
	Noise             float64
	ExactTol          float64
}

var defaultDepth2Samples = depth2SamplesParams{
	D: 10, M: 5,
	Grid:      []int{10_000, 30_000, 100_000, 300_000, 1_000_000},
	QuickGrid: []int{10_000, 30_000, 100_000},
	Seeds:     5, QuickSeeds: 2,
	Noise:    0.1,
	ExactTol: 1e-6,
}

func init() {
	Register(Experiment{
		Name: "depth2-samples",
		Description: "Parameter error of depth2.Fit versus n for y = Σ a_i·ReLU(w_i·x + b_i) (Awasthi–Tang–Vijayaraghavan, Theorem 3.1, ℓ = 1): " +
			"d=10, m=5, |b_i| ≤ 1, |a_i| ∈ [0.5, 2], n ∈ {1e4, 3e4, 1e5, 3e5, 1e6}, 5 seeds; noiseless (moment estimate, and refined: exact expected) " +
			"and Gaussian label noise at 10% of the output RMS (error expected to fall like n^-1/2).",
		Run: func(ctx context.Context, cfg Config) (*Report, error) {
			return runDepth2Samples(ctx, cfg, defaultDepth2Samples)
		},
	})
}

// Depth2SamplesRow summarises one n.
type Depth2SamplesRow struct {
	N                  int      `json:"n"`
	Seeds              int      `json:"seeds"`
	Exact              int      `json:"exact"`
	MomentNoiseless    *float64 `json:"median_moment_err_noiseless"`
	RefinedNoiseless   *float64 `json:"median_refined_err_noiseless"`
	MomentNoisy        *float64 `json:"median_moment_err_noisy"`
	RefinedNoisy       *float64 `json:"median_refined_err_noisy"`
	MedianSecondsClean float64  `json:"median_seconds_noiseless"`
	MedianSecondsNoisy float64  `json:"median_seconds_noisy"`
	Failures           int      `json:"failed_fits"`
}

func runDepth2Samples(ctx context.Context, cfg Config, p depth2SamplesParams) (*Report, error) {
	grid := p.Grid
	if cfg.Quick {
		grid = p.QuickGrid
	}
	nSeeds := cfg.seeds(p.Seeds, p.QuickSeeds)
	runs, err := depth2SampleRuns(ctx, cfg, p, grid, nSeeds)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Title: fmt.Sprintf("Depth-2 networks with biases: parameter error vs samples (d=%d, m=%d, %d seeds)", p.D, p.M, nSeeds),
		Columns: []string{"n", fmt.Sprintf("exact (noiseless, ≤ %.0e)", p.ExactTol), "moment estimate, noiseless", "refined, noiseless",
			fmt.Sprintf("moment estimate, noise %g", p.Noise), fmt.Sprintf("refined, noise %g", p.Noise), "median fit s (noiseless / noisy)"},
		Plot: PlotSpec{XLabel: "samples n", YLabel: "max parameter error (median over seeds, min–max)", LogX: true, LogY: true},
	}
	var rows []Depth2SamplesRow
	series := map[string]*Series{}
	order := []string{"moment estimate, noiseless", "refined, noiseless", "moment estimate, noisy", "refined, noisy"}
	for _, name := range order {
		series[name] = &Series{Name: name}
	}
	var momentClean, momentNoisy, refinedNoisy logSlope
	for _, n := range grid {
		row, mc, rc, mn, rn := depth2SamplesSummary(n, runs, p.ExactTol)
		rows = append(rows, row)
		for name, vals := range map[string][]float64{order[0]: mc, order[1]: rc, order[2]: mn, order[3]: rn} {
			lo, med, hi := minMedMax(vals)
			s := series[name]
			s.X = append(s.X, float64(n))
			s.Y = append(s.Y, math.Max(med, 1e-17))
			s.Lo = append(s.Lo, math.Max(lo, 1e-17))
			s.Hi = append(s.Hi, math.Max(hi, 1e-17))
		}
		lg := math.Log10(float64(n))
		momentClean.add(lg, row.MomentNoiseless)
		momentNoisy.add(lg, row.MomentNoisy)
		refinedNoisy.add(lg, row.RefinedNoisy)
		rep.Rows = append(rep.Rows, []string{
			fmt.Sprintf("%d", n), fmt.Sprintf("%d/%d", row.Exact, row.Seeds),
			fmtErr(row.MomentNoiseless), fmtErr(row.RefinedNoiseless), fmtErr(row.MomentNoisy), fmtErr(row.RefinedNoisy),
			fmt.Sprintf("%.2f / %.2f", row.MedianSecondsClean, row.MedianSecondsNoisy),
		})
	}
	for _, name := range order {
		rep.Series = append(rep.Series, *series[name])
	}
	if s := series[order[3]]; len(s.Y) > 0 && !math.IsInf(s.Y[0], 0) {
		ref := Series{Name: "n^-1/2 reference", Dashed: true}
		for _, n := range grid {
			ref.X = append(ref.X, float64(n))
			ref.Y = append(ref.Y, s.Y[0]*math.Sqrt(float64(grid[0])/float64(n)))
		}
		rep.Series = append(rep.Series, ref)
	}
	slopeMC, slopeMN, slopeRN := momentClean.slope(), momentNoisy.slope(), refinedNoisy.slope()
	rep.Notes = []string{
		fmt.Sprintf("Teachers from synth.Depth2Teacher (unit rows w_i, b_i uniform in [−1, 1], |a_i| uniform in [0.5, 2] with random signs, one output, no output bias); standard Gaussian X; depth2.Fit with Hidden=%d (ℓ = 1). Error: metrics.CompareDepth2's MaxErr = max over units of ‖w − ŵ‖, |b − b̂|, |a − â| (and the output bias), after matching up to permutation in the paper's normalisation ‖w_i‖ = 1. Medians over seeds %d..%d; a failed fit counts as +Inf.", p.M, cfg.Seed, cfg.Seed+uint64(nSeeds)-1),
		fmt.Sprintf("\"Moment estimate\" is the paper's pipeline (Algorithm 6 + RecoverScalars, output bias from T_0); \"refined\" is the final model (least squares, Levenberg–Marquardt refinement, sign resolution). Noise: i.i.d. Gaussian, σ = %g × RMS of the clean outputs.", p.Noise),
		fmt.Sprintf("Fitted log-log slopes (least squares on log10 medians): moment estimate %s noiseless, %s noisy; refined noisy %s (n^-1/2 predicts -0.5).", fmtSlope(slopeMC), fmtSlope(slopeMN), fmtSlope(slopeRN)),
	}
	rep.Results = struct {
		Params       depth2SamplesParams `json:"params"`
		Rows         []Depth2SamplesRow  `json:"per_n"`
		SlopeMoment  *float64            `json:"slope_moment_noiseless"`
		SlopeMomentN *float64            `json:"slope_moment_noisy"`
		SlopeRefined *float64            `json:"slope_refined_noisy"`
		Runs         []Depth2Run         `json:"runs"`
	}{p, rows, slopeMC, slopeMN, slopeRN, runs}
	return rep, nil
}

// depth2SampleRuns fits depth2.Fit on every n of grid and nSeeds seeds,
// noiseless and with label noise p.Noise.
func depth2SampleRuns(ctx context.Context, cfg Config, p depth2SamplesParams, grid []int, nSeeds int) ([]Depth2Run, error) {
	var runs []Depth2Run
	total, done := len(grid)*nSeeds*2, 0
	for _, n := range grid {
		for i := 0; i < nSeeds; i++ {
			seed := cfg.Seed + uint64(i)
			for _, c := range []struct {
				name  string
				noise float64
			}{{"noiseless", 0}, {"noisy", p.Noise}} {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				teacher, X, Y, err := depth2Instance(synth.Depth2Config{D: p.D, M: p.M}, n, c.noise, seed)
				if err != nil {
					return nil, err
				}
				run := depth2Fit(ctx, teacher, X, Y, depth2.Options{Hidden: p.M, Seed: seed}, false)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				run.Case = c.name
				runs = append(runs, run)
				done++
				cfg.progress(fmt.Sprintf("depth2-samples n=%d", n), done, total)
			}
		}
	}
	return runs, nil
}

// depth2SamplesSummary summarises the runs at n: the row (exact fits
// within exactTol, medians, failures) and the errors over seeds of the
// moment estimate and the refined fit, noiseless (mc, rc) and noisy (mn,
// rn), a failed fit counting as +Inf.
func depth2SamplesSummary(n int, runs []Depth2Run, exactTol float64) (row Depth2SamplesRow, mc, rc, mn, rn []float64) {
	row = Depth2SamplesRow{N: n}
	var tc, tn []float64
	for _, r := range runs {
		if r.N != n {
			continue
		}
		if r.Error != "" {
			row.Failures++
		}
		if r.Case == "noiseless" {
			row.Seeds++
			mc = append(mc, errOrInf(r.MomentErr))
			rc = append(rc, errOrInf(r.RefinedErr))
			tc = append(tc, r.Seconds)
			if errOrInf(r.RefinedErr) <= exactTol {
				row.Exact++
			}
		} else {
			mn = append(mn, errOrInf(r.MomentErr))
			rn = append(rn, errOrInf(r.RefinedErr))
			tn = append(tn, r.Seconds)
		}
	}
	row.MomentNoiseless, row.RefinedNoiseless = finitePtr(median(mc)), finitePtr(median(rc))
	row.MomentNoisy, row.RefinedNoisy = finitePtr(median(mn)), finitePtr(median(rn))
	row.MedianSecondsClean, row.MedianSecondsNoisy = median(tc), median(tn)
	return row, mc, rc, mn, rn
}

// logSlope collects the points (log10 n, log10 v) of a median error v
// whose log-log slope a report states.
type logSlope struct{ x, y []float64 }

// add adds the point at lg = log10 n when v is known.
func (l *logSlope) add(lg float64, v *float64) {
	if v != nil {
		l.x = append(l.x, lg)
		l.y = append(l.y, math.Log10(*v))
	}
}

// slope is the least-squares slope of the points (slope).
func (l *logSlope) slope() *float64 { return slope(l.x, l.y) }
