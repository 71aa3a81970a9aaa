package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/twolayer"
)

// demoResult is what demo prints with --json.
type demoResult struct {
	Command     string                `json:"command"`
	Problem     twoLayerGen           `json:"problem"`
	NoiseSigma  float64               `json:"noise_sigma"`
	Route       string                `json:"route"`
	Reason      string                `json:"reason"`
	Certificate twolayer.Certificate  `json:"certificate"`
	Errors      metrics.TwoLayerError `json:"errors"`
	Diagnosis   *residualDiagnosis    `json:"diagnosis,omitempty"`
	Warnings    []string              `json:"warnings"`
	Notes       []string              `json:"notes,omitempty"`
	SecondsGen  float64               `json:"seconds_generate"`
	SecondsFit  float64               `json:"seconds_fit"`
}

const demoLong = `Generate a random two-layer ReLU network Y = ReLU(X·Vᵀ)·Uᵀ (V k×d with unit
rows, U m×k), draw n Gaussian inputs, learn V and U back from (X, Y) alone
with twolayer.Fit, and show the truth next to the recovered weights. With
--noise 0 the recovery is exact up to float64 rounding (the residual
certificate says so); with noise it is approximate: the certificate is not
met, the output says what the residual shows, and the exit status is 3 (as
for "relurec learn"). Nothing is written.

This is "relurec gen twolayer" + "relurec learn twolayer" + "relurec eval"
in one step; the same --seed gives the same network there.`

const demoExample = `  # The default: d=20, k=5, m=8, 100 000 noiseless samples
  relurec demo

  # Noisy outputs (σ = 10% of the output RMS): approximate recovery, exit status 3
  relurec demo --noise 0.1 --n 300000 --seed 3

  # ... refined by local least squares
  relurec demo --noise 0.1 --refine

  # Machine-readable
  relurec demo --json`

func newDemoCmd(a *app) *cobra.Command {
	g := twoLayerGen{D: 20, K: 5, M: 8, N: 100_000, CovCond: 1, NoiseKind: "gaussian", Seed: 1}
	var refine bool
	c := &cobra.Command{
		Use:     "demo",
		Short:   "Learn a random two-layer ReLU network from its samples and compare with the truth",
		Long:    demoLong,
		Example: demoExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runDemo(cmd, g, refine)
		}),
	}
	g.register(c, false)
	c.Flags().BoolVar(&refine, "refine", false, "refine the noisy-route estimate by local least squares")
	return c
}

// runDemo is demo: generate a problem, learn it back, compare, print.
func (a *app) runDemo(cmd *cobra.Command, g twoLayerGen, refine bool) error {
	if err := g.validate(); err != nil {
		return err
	}
	start := time.Now()
	gen, err := g.generate()
	if err != nil {
		return err
	}
	genTime := time.Since(start)
	progress, clear := a.progress()
	fitStart := time.Now()
	res, err := twolayer.Fit(cmd.Context(), gen.x, gen.y, twolayer.Options{Hidden: g.K, Seed: g.Seed, Refine: refine, Progress: progress})
	clear()
	if err != nil {
		return err
	}
	fitTime := time.Since(fitStart)
	e, err := metrics.CompareTwoLayer(gen.teacher, res.Model)
	if err != nil {
		return err
	}
	out := demoResult{
		Command: "demo", Problem: g, NoiseSigma: gen.sigma,
		Route: res.Route, Reason: res.Reason, Certificate: res.Certificate,
		Errors: e, SecondsGen: genTime.Seconds(), SecondsFit: fitTime.Seconds(),
	}
	out.Warnings, out.Notes = splitWarnings(res.Certificate.Met, flagTexts(res.Warnings, cmd))
	var notCertified error
	if !res.Certificate.Met {
		unrefined := ""
		if !refine {
			unrefined = "--refine fits it by least squares"
		}
		d := diagnoseResidual(gen.x, gen.y, res.Model, g.K, res.Certificate.Residual, unrefined)
		out.Diagnosis = &d
		notCertified = errNotCertified(res.Certificate, d.Text, "")
	}
	err = a.emit(out, func(w io.Writer) {
		noise := "noiseless"
		if g.Noise > 0 {
			noise = fmt.Sprintf("noise σ = %g × output RMS", g.Noise)
		}
		fmt.Fprintf(w, "Learn Y = ReLU(X·Vᵀ)·Uᵀ from %d samples: d=%d inputs, k=%d hidden units, m=%d outputs, %s, seed %d.\n\n",
			g.N, g.D, g.K, g.M, noise, g.Seed)
		demoUnits(w, gen.teacher, res.Model, e.Perm)
		fmt.Fprintf(w, "(first entries; rows of V scaled to unit length, U's columns scaled to match, units matched up to order)\n\n")
		table(w, out.rows(g, res, genTime, fitTime))
		switch {
		case g.Noise == 0:
			fmt.Fprintf(w, "\nNext: relurec demo --noise 0.1 (noisy outputs), relurec gen/learn/eval --help (your own files).\n")
		case !refine:
			fmt.Fprintf(w, "\nNext: relurec demo --noise %g --refine (least-squares refinement of this estimate).\n", g.Noise)
		}
	})
	if err != nil {
		return err
	}
	return notCertified
}

// rows is demo's human table.
func (out *demoResult) rows(g twoLayerGen, res *twolayer.Result, genTime, fitTime time.Duration) [][2]string {
	cert := fmt.Sprintf("residual %.3g > tol %.0e: approximate", res.Certificate.Residual, res.Certificate.Tol)
	if res.Certificate.Met {
		cert = fmt.Sprintf("residual %.3g ≤ tol %.0e: exact", res.Certificate.Residual, res.Certificate.Tol)
	} else if g.Noise > 0 {
		cert = fmt.Sprintf("residual %.3g (the noise alone gives ≈ %.3g): approximate", res.Certificate.Residual, g.Noise/math.Sqrt(1+g.Noise*g.Noise))
	}
	rows := [][2]string{
		{"route", res.Route},
		{"reason", res.Reason},
		{"max relative weight error", fmt.Sprintf("%.3g", out.Errors.MaxRelErr)},
		{"certificate", cert},
	}
	rows = append(rows, diagnosisRows(out.Diagnosis)...)
	rows = append(rows, warningRows(out.Warnings, out.Notes)...)
	return append(rows, [2]string{"time", fmt.Sprintf("generate %.2f s, fit %.2f s", genTime.Seconds(), fitTime.Seconds())})
}

// demoUnits prints, per hidden unit, the first entries of the true and the
// recovered row of V (both scaled to unit length) and the corresponding
// column of U (scaled by the same factor), matched by perm (truth unit i ↔
// model unit perm[i]).
func demoUnits(w io.Writer, truth, model *nn.MLP, perm []int) {
	const show = 3
	tv, tu := metrics.UnitRows(truth)
	mv, mu := metrics.UnitRows(model)
	k, d := tv.Dims()
	mk, _ := mv.Dims()
	cols := min(show, d)
	vec := func(m *mat.Dense, i, n int, col bool) string {
		var b strings.Builder
		for j := 0; j < n; j++ {
			v := 0.0
			if col {
				v = m.At(j, i)
			} else {
				v = m.At(i, j)
			}
			fmt.Fprintf(&b, "%+.4f ", v)
		}
		return strings.TrimSpace(b.String()) + " …"
	}
	um, _ := tu.Dims()
	ucols := min(show, um)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "unit\ttrue V row\trecovered V row\ttrue U col\trecovered U col\n")
	for i := 0; i < k; i++ {
		j := -1
		if i < len(perm) {
			j = perm[i]
		}
		rec, recU := "(unmatched)", ""
		if j >= 0 && j < mk {
			rec, recU = vec(mv, j, cols, false), vec(mu, j, ucols, true)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, vec(tv, i, cols, false), rec, vec(tu, i, ucols, true), recU)
	}
	tw.Flush()
}
