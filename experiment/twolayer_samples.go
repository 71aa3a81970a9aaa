package experiment

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/twolayer"
)

// samplesParams is the grid of the twolayer-samples experiment. The
// registered experiment uses defaultSamples; tests use a tiny one.
type samplesParams struct {
	D, K, M      int
	CondV, CondU float64 // teacher condition numbers; 0 = synth's default
	Grid         []int   // sample sizes n
	QuickGrid    []int   // sample sizes with Config.Quick
	Seeds        int     // default number of seeds
	QuickSeeds   int     // default number of seeds with Config.Quick
	NoiseLevel   float64 // Gaussian noise σ relative to the RMS of the clean outputs
	ExactTol     float64 // MaxRelErr at or below which a noiseless run counts as exact
}

var defaultSamples = samplesParams{
	D: 20, K: 5, M: 8,
	Grid:       []int{10_000, 30_000, 100_000, 300_000, 1_000_000},
	QuickGrid:  []int{10_000, 30_000, 100_000},
	Seeds:      5,
	QuickSeeds: 2,
	NoiseLevel: 0.1,
	ExactTol:   1e-9,
}

func init() {
	Register(Experiment{
		Name: "twolayer-samples",
		Description: "Recovery error of twolayer.Fit versus the number of samples n for Y = ReLU(X·Vᵀ)·Uᵀ " +
			"(Bakshi–Jayaram–Woodruff, Thm 7 and Thm 10): d=20, k=5, m=8, Gaussian X, n ∈ {1e4, 3e4, 1e5, 3e5, 1e6}, 5 seeds; " +
			"noiseless data (auto route; exact recovery expected) and Gaussian noise at 10% of the output RMS " +
			"(noisy route, with and without refinement; error expected to fall like n^-1/2).",
		Run: func(ctx context.Context, cfg Config) (*Report, error) {
			return runSamples(ctx, cfg, defaultSamples)
		},
	})
}

// Cases of the twolayer-samples experiment.
const (
	caseNoiseless = "noiseless"
	caseNoisy     = "noisy"
	caseRefined   = "noisy+refine"
)

// SampleRun is one fit of the twolayer-samples experiment.
type SampleRun struct {
	N    int    `json:"n"`
	Seed uint64 `json:"seed"`
	Case string `json:"case"`
	// MaxRelErr and its parts (metrics.TwoLayerError); null when the fit
	// failed.
	MaxRelErr  *float64 `json:"max_rel_err"`
	MaxRowErrV *float64 `json:"max_row_err_v,omitempty"`
	RelErrU    *float64 `json:"rel_err_u,omitempty"`
	Route      string   `json:"route,omitempty"`
	Residual   *float64 `json:"residual,omitempty"`
	CertMet    bool     `json:"certificate_met"`
	Seconds    float64  `json:"seconds"`
	Warnings   []string `json:"warnings,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// SamplesRow summarises one sample size over seeds.
type SamplesRow struct {
	N                  int      `json:"n"`
	Seeds              int      `json:"seeds"`
	ExactRecoveries    int      `json:"exact_recoveries"`
	ExactFraction      float64  `json:"exact_fraction"`
	MedianNoiseless    *float64 `json:"median_err_noiseless"`
	MedianNoisy        *float64 `json:"median_err_noisy"`
	MedianRefined      *float64 `json:"median_err_noisy_refined"`
	MedianSecondsFit   float64  `json:"median_seconds_noiseless"`
	MedianSecondsNoisy float64  `json:"median_seconds_noisy"`
	MedianSecondsRef   float64  `json:"median_seconds_noisy_refined"`
	Failures           int      `json:"failed_fits"`
}

// SamplesResults is the typed content of Report.Results for
// twolayer-samples.
type SamplesResults struct {
	D          int          `json:"d"`
	K          int          `json:"k"`
	M          int          `json:"m"`
	CondV      float64      `json:"cond_v"`
	CondU      float64      `json:"cond_u"`
	NoiseLevel float64      `json:"noise_level"`
	ExactTol   float64      `json:"exact_tol"`
	Grid       []int        `json:"grid"`
	Seeds      []uint64     `json:"seeds"`
	PerN       []SamplesRow `json:"per_n"`
	// SlopeNoisy and SlopeRefined are least-squares slopes of
	// log10(median error) against log10(n) over the grid (null with fewer
	// than two usable points). The n^-1/2 rate predicts -0.5.
	SlopeNoisy   *float64 `json:"slope_noisy"`
	SlopeRefined *float64 `json:"slope_noisy_refined"`
	// SlopesInBand reports both slopes within [-0.6, -0.4].
	SlopesInBand bool        `json:"slopes_in_band"`
	Runs         []SampleRun `json:"runs"`
}

func runSamples(ctx context.Context, cfg Config, p samplesParams) (*Report, error) {
	grid := p.Grid
	if cfg.Quick {
		grid = p.QuickGrid
	}
	nSeeds := cfg.seeds(p.Seeds, p.QuickSeeds)
	seeds := make([]uint64, nSeeds)
	for i := range seeds {
		seeds[i] = cfg.Seed + uint64(i)
	}
	res := &SamplesResults{
		D: p.D, K: p.K, M: p.M, CondV: p.CondV, CondU: p.CondU,
		NoiseLevel: p.NoiseLevel, ExactTol: p.ExactTol, Grid: grid, Seeds: seeds,
	}
	teachers := make([]*nn.MLP, nSeeds)
	for i, s := range seeds {
		t, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: p.D, K: p.K, M: p.M, CondV: p.CondV, CondU: p.CondU},
			synth.NewRand(deriveSeed(s, 0, 1)))
		if err != nil {
			return nil, fmt.Errorf("teacher for seed %d: %w", s, err)
		}
		teachers[i] = t
	}
	total := len(grid) * nSeeds * 3
	done := 0
	for _, n := range grid {
		for i, s := range seeds {
			runs, err := samplesOne(ctx, p, teachers[i], n, s)
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, runs...)
			done += len(runs)
			cfg.progress(fmt.Sprintf("twolayer-samples n=%d", n), done, total)
		}
	}
	res.summarise()
	return res.report(cfg), nil
}

// samplesOne runs the three cases at one (n, seed). X is shared by the
// noiseless and noisy cases so their errors differ only by the noise.
func samplesOne(ctx context.Context, p samplesParams, teacher *nn.MLP, n int, seed uint64) ([]SampleRun, error) {
	x, err := synth.GaussianInputs(n, p.D, nil, synth.NewRand(deriveSeed(seed, uint64(n), 2)))
	if err != nil {
		return nil, fmt.Errorf("inputs n=%d seed %d: %w", n, seed, err)
	}
	yClean, _, err := synth.TwoLayerData(teacher, x, synth.Noise{Kind: "none"}, synth.NewRand(deriveSeed(seed, uint64(n), 3)))
	if err != nil {
		return nil, fmt.Errorf("data n=%d seed %d: %w", n, seed, err)
	}
	yNoisy, _, err := synth.TwoLayerData(teacher, x, synth.Noise{Kind: "gaussian", Level: p.NoiseLevel}, synth.NewRand(deriveSeed(seed, uint64(n), 4)))
	if err != nil {
		return nil, fmt.Errorf("noisy data n=%d seed %d: %w", n, seed, err)
	}
	cases := []struct {
		name string
		y    *mat.Dense
		opt  twolayer.Options
	}{
		{caseNoiseless, yClean, twolayer.Options{Hidden: p.K, Seed: seed}},
		{caseNoisy, yNoisy, twolayer.Options{Hidden: p.K, Seed: seed, Route: "noisy"}},
		{caseRefined, yNoisy, twolayer.Options{Hidden: p.K, Seed: seed, Route: "noisy", Refine: true}},
	}
	var out []SampleRun
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		run := SampleRun{N: n, Seed: seed, Case: c.name}
		start := time.Now()
		r, err := twolayer.Fit(ctx, x, c.y, c.opt)
		run.Seconds = time.Since(start).Seconds()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			run.Error = err.Error()
			out = append(out, run)
			continue
		}
		run.Route = r.Route
		run.Residual = fptr(r.Certificate.Residual)
		run.CertMet = r.Certificate.Met
		run.Warnings = errs.Strings(r.Warnings)
		e, err := metrics.CompareTwoLayer(teacher, r.Model)
		if err != nil {
			run.Error = "compare: " + err.Error()
		} else {
			run.MaxRelErr = fptr(e.MaxRelErr)
			run.MaxRowErrV = fptr(e.MaxRowErrV)
			run.RelErrU = fptr(e.RelErrU)
		}
		out = append(out, run)
	}
	return out, nil
}

func (res *SamplesResults) summarise() {
	var logN, logNoisy, logRef []float64
	var logNR []float64
	for _, n := range res.Grid {
		row := SamplesRow{N: n}
		var clean, noisy, ref, tClean, tNoisy, tRef []float64
		for _, r := range res.Runs {
			if r.N != n {
				continue
			}
			e := math.Inf(1) // a failed fit counts as not recovered
			if r.MaxRelErr != nil && !math.IsNaN(*r.MaxRelErr) {
				e = *r.MaxRelErr
			}
			if r.Error != "" {
				row.Failures++
			}
			switch r.Case {
			case caseNoiseless:
				row.Seeds++
				clean = append(clean, e)
				tClean = append(tClean, r.Seconds)
				if e <= res.ExactTol {
					row.ExactRecoveries++
				}
			case caseNoisy:
				noisy = append(noisy, e)
				tNoisy = append(tNoisy, r.Seconds)
			case caseRefined:
				ref = append(ref, e)
				tRef = append(tRef, r.Seconds)
			}
		}
		if row.Seeds > 0 {
			row.ExactFraction = float64(row.ExactRecoveries) / float64(row.Seeds)
		}
		row.MedianNoiseless = finitePtr(median(clean))
		row.MedianNoisy = finitePtr(median(noisy))
		row.MedianRefined = finitePtr(median(ref))
		row.MedianSecondsFit = median(tClean)
		row.MedianSecondsNoisy = median(tNoisy)
		row.MedianSecondsRef = median(tRef)
		if v := row.MedianNoisy; v != nil && *v > 0 {
			logN = append(logN, math.Log10(float64(n)))
			logNoisy = append(logNoisy, math.Log10(*v))
		}
		if v := row.MedianRefined; v != nil && *v > 0 {
			logNR = append(logNR, math.Log10(float64(n)))
			logRef = append(logRef, math.Log10(*v))
		}
		res.PerN = append(res.PerN, row)
	}
	res.SlopeNoisy = slope(logN, logNoisy)
	res.SlopeRefined = slope(logNR, logRef)
	res.SlopesInBand = slopeInBand(res.SlopeNoisy) && slopeInBand(res.SlopeRefined)
}

func (res *SamplesResults) report(cfg Config) *Report {
	rep := &Report{
		Title: fmt.Sprintf("Two-layer recovery error vs samples (d=%d, k=%d, m=%d, %d seeds)", res.D, res.K, res.M, len(res.Seeds)),
		Columns: []string{"n", "exact recoveries (noiseless)", "median err, noiseless",
			fmt.Sprintf("median err, noise %g", res.NoiseLevel), fmt.Sprintf("median err, noise %g + refine", res.NoiseLevel),
			"median fit s (noiseless / noisy / refined)"},
		Plot: PlotSpec{
			XLabel: "samples n",
			YLabel: "max relative weight error (MaxRelErr over seeds: median, min–max)",
			LogX:   true, LogY: true,
		},
		Results: res,
	}
	for _, row := range res.PerN {
		rep.Rows = append(rep.Rows, []string{
			fmt.Sprintf("%d", row.N),
			fmt.Sprintf("%d/%d", row.ExactRecoveries, row.Seeds),
			fmtErr(row.MedianNoiseless),
			fmtErr(row.MedianNoisy),
			fmtErr(row.MedianRefined),
			fmt.Sprintf("%.2f / %.2f / %.2f", row.MedianSecondsFit, row.MedianSecondsNoisy, row.MedianSecondsRef),
		})
	}
	band := func(name, c string) Series {
		s := Series{Name: name}
		for _, n := range res.Grid {
			var vals []float64
			for _, r := range res.Runs {
				if r.N == n && r.Case == c {
					e := math.Inf(1)
					if r.MaxRelErr != nil {
						e = *r.MaxRelErr
					}
					vals = append(vals, e)
				}
			}
			lo, med, hi := minMedMax(vals)
			s.X = append(s.X, float64(n))
			s.Y = append(s.Y, med)
			s.Lo = append(s.Lo, lo)
			s.Hi = append(s.Hi, hi)
		}
		return s
	}
	rep.Series = []Series{
		band("noiseless (auto route)", caseNoiseless),
		band(fmt.Sprintf("noise %g, noisy route", res.NoiseLevel), caseNoisy),
		band(fmt.Sprintf("noise %g, noisy route + refine", res.NoiseLevel), caseRefined),
	}
	// Reference n^-1/2 line through the first noisy median.
	if noisy := rep.Series[1]; len(noisy.Y) > 0 && !math.IsInf(noisy.Y[0], 0) && !math.IsNaN(noisy.Y[0]) && noisy.Y[0] > 0 {
		ref := Series{Name: "n^-1/2 reference", Dashed: true}
		for _, n := range res.Grid {
			ref.X = append(ref.X, float64(n))
			ref.Y = append(ref.Y, noisy.Y[0]*math.Sqrt(float64(res.Grid[0])/float64(n)))
		}
		rep.Series = append(rep.Series, ref)
	}
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("Error is metrics.CompareTwoLayer's MaxRelErr (hidden units matched up to permutation and positive scaling); "+
			"a noiseless run counts as exact when MaxRelErr ≤ %.0e. Medians are over seeds %d..%d; a failed fit counts as +Inf.",
			res.ExactTol, res.Seeds[0], res.Seeds[len(res.Seeds)-1]),
		fmt.Sprintf("Noise is i.i.d. Gaussian with σ = %g × RMS of the clean outputs. Noisy fits use Route \"noisy\"; "+
			"the refined column is the same data with Options.Refine.", res.NoiseLevel),
		fmt.Sprintf("Fitted log-log slope of the median noisy error vs n (least squares on log10): %s unrefined, %s refined; "+
			"n^-1/2 predicts -0.5, and [%g, %g] is the accepted band: %s.",
			fmtSlope(res.SlopeNoisy), fmtSlope(res.SlopeRefined), slopeLo, slopeHi, slopeVerdict(res.SlopeNoisy, res.SlopeRefined)),
	)
	failures := 0
	for _, row := range res.PerN {
		failures += row.Failures
	}
	if failures > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d fits failed (error messages in results.json).", failures))
	}
	return rep
}

// The band in which the fitted noisy-error slope is taken to agree with the
// n^-1/2 rate of Thm 10 (the least-squares rate of Lemma 20).
const slopeLo, slopeHi = -0.6, -0.4

func slopeInBand(s *float64) bool { return s != nil && *s >= slopeLo && *s <= slopeHi }

func slopeVerdict(unrefined, refined *float64) string {
	switch {
	case unrefined == nil || refined == nil:
		return "too few points to fit"
	case slopeInBand(unrefined) && slopeInBand(refined):
		return "both inside"
	case slopeInBand(unrefined):
		return "unrefined inside, refined OUTSIDE"
	case slopeInBand(refined):
		return "unrefined OUTSIDE, refined inside"
	default:
		return "both OUTSIDE"
	}
}

// deriveSeed mixes a base seed with a sample size and a stream tag
// (splitmix64), so teachers, inputs and noise use independent streams.
func deriveSeed(seed, n, tag uint64) uint64 {
	z := seed*0x9E3779B97F4A7C15 + n*0xBF58476D1CE4E5B9 + tag*0x94D049BB133111EB
	z ^= z >> 30
	z *= 0xBF58476D1CE4E5B9
	z ^= z >> 27
	z *= 0x94D049BB133111EB
	z ^= z >> 31
	return z
}

func fptr(v float64) *float64 { return &v }

func finitePtr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func median(xs []float64) float64 {
	_, m, _ := minMedMax(xs)
	return m
}

// minMedMax returns the minimum, median and maximum of xs (NaN if empty).
func minMedMax(xs []float64) (lo, med, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	h := len(s) / 2
	med = s[h]
	if len(s)%2 == 0 {
		med = (s[h-1] + s[h]) / 2
	}
	return s[0], med, s[len(s)-1]
}

// slope is the least-squares slope of y against x (nil with < 2 points).
func slope(x, y []float64) *float64 {
	if len(x) < 2 {
		return nil
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(x))
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return nil
	}
	return fptr(sxy / sxx)
}

func fmtErr(v *float64) string {
	if v == nil {
		return "failed"
	}
	return fmt.Sprintf("%.2e", *v)
}

func fmtSlope(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", *v)
}
