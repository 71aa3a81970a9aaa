package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/internal/jsonsafe"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/robust"
	"github.com/relurec/relurec/synth"
)

func newRecoverCmd(a *app) *cobra.Command {
	return groupCmd("recover", "Recover hidden codes from corrupted ReLU observations",
		`  relurec recover latent --a A.npy --v V.npy --out C.npy`,
		newRecoverLatentCmd(a))
}

// ------------------------------------------------------------ gen robust

type genRobustOptions struct {
	D         int     `json:"d"`
	K         int     `json:"k"`
	N         int     `json:"n"`
	S         int     `json:"s"`
	Magnitude float64 `json:"magnitude"`
	Delta     float64 `json:"delta"`
	Bias      string  `json:"bias"`
	Seed      uint64  `json:"seed"`
	Out       string  `json:"out"`
}

const genRobustLong = `Generate a robust-recovery problem (Mazumdar and Rawat, Theorem 4): a Gaussian
A (d×k), one bias b from --bias, n unit-norm codes (rows of C, n×k), and for
each code an observation v = ReLU(A·c + b) + e + w (rows of V, n×d) with s
outliers of magnitude --magnitude·U[0.5, 1.5] and random sign (rows of E) and
dense noise w ~ U[−δ, δ] (rows of W).

The .npz given by --out holds A, V, C, E, W and b (1×d).`

const genRobustExample = `  relurec gen robust --d 4000 --k 10 --n 10 --s 40 --magnitude 50 --seed 1 --out rob.npz
  relurec recover latent --a rob.npz --v rob.npz --truth rob.npz --bias gaussian:0,0.5 --out C.npy`

func newGenRobustCmd(a *app) *cobra.Command {
	o := genRobustOptions{D: 4000, K: 10, N: 10, S: 40, Magnitude: 50, Delta: 0.1, Bias: "gaussian:0,0.5", Seed: 1}
	c := &cobra.Command{
		Use:     "robust",
		Short:   "Generate corrupted observations v = ReLU(A·c + b) + e + w for robust recovery",
		Long:    genRobustLong,
		Example: genRobustExample,
		Args:    cobra.NoArgs,
		RunE:    a.leaf(func(cmd *cobra.Command, _ []string) error { return a.runGenRobust(o) }),
	}
	f := c.Flags()
	f.IntVar(&o.D, "d", o.D, "observed dimension d (rows of A, columns of V)")
	f.IntVar(&o.K, "k", o.K, "code dimension k")
	f.IntVar(&o.N, "n", o.N, "number of observations (rows of V)")
	f.IntVar(&o.S, "s", o.S, "outliers per observation")
	f.Float64Var(&o.Magnitude, "magnitude", o.Magnitude, "outlier magnitude E (each is ±E·U[0.5, 1.5])")
	f.Float64Var(&o.Delta, "delta", o.Delta, "dense noise bound δ (w ~ U[−δ, δ])")
	f.StringVar(&o.Bias, "bias", o.Bias, "bias density, e.g. gaussian:0,0.5")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "random seed")
	f.StringVar(&o.Out, "out", "", "output .npz (A, V, C, E, W, b); required")
	return c
}

// validate checks the flags of gen robust and parses the bias density.
func (o *genRobustOptions) validate() (density.Density, error) {
	bias, err := parseBias(o.Bias)
	if err != nil {
		return nil, err
	}
	if o.K < 1 || o.D <= o.K || o.N < 1 || o.S < 0 || o.S > o.D {
		return nil, usageErrorf("need 1 ≤ --k < --d, --n ≥ 1 and 0 ≤ --s ≤ --d; got d=%d, k=%d, n=%d, s=%d", o.D, o.K, o.N, o.S)
	}
	for _, v := range []struct {
		name string
		x    float64
	}{{"magnitude", o.Magnitude}, {"delta", o.Delta}} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) || v.x < 0 {
			return nil, usageErrorf("--%s must be finite and ≥ 0, got %g", v.name, v.x)
		}
	}
	var mem genMemory
	for _, name := range []string{"V", "E", "W"} {
		mem.matrix(name, o.N, o.D)
	}
	mem.matrix("C", o.N, o.K)
	mem.matrix("A", o.D, o.K)
	if err := mem.check("use a smaller --n, --d or --k"); err != nil {
		return nil, err
	}
	if o.Out == "" {
		return nil, usageErrorf("--out is required")
	}
	if err := checkOutputs(nil, [3]string{"out", o.Out, ".npz"}); err != nil {
		return nil, err
	}
	return bias, nil
}

// runGenRobust is gen robust: validate, draw, write, print.
func (a *app) runGenRobust(o genRobustOptions) error {
	start := time.Now()
	bias, err := o.validate()
	if err != nil {
		return err
	}
	in, err := synth.RobustData(synth.RobustConfig{D: o.D, K: o.K, N: o.N, Bias: bias, S: o.S, Magnitude: o.Magnitude, Delta: o.Delta}, synth.NewRand(o.Seed))
	if err != nil {
		return a.magnitudeError(err)
	}
	arrays := map[string]*mat.Dense{"A": in.A, "V": in.V, "C": in.C, "E": in.E, "W": in.W, "b": rowMatrix(in.B)}
	if err := a.checkGenerated(nil, arrays); err != nil {
		return err
	}
	man := dataio.NewManifest("gen robust", a.args)
	man.Version, man.Options, man.Seed = relurecVersion(), o, o.Seed
	files, err := a.writeAll(man, []outFile{{o.Out, func(p string) error {
		return dataio.WriteNPZ(p, arrays)
	}}})
	if err != nil {
		return err
	}
	mu := robust.ScaleMoments(bias).Mu
	res := map[string]any{"command": "gen robust", "options": o, "outputs": files, "mu": mu, "seconds": time.Since(start).Seconds()}
	return a.emit(res, func(w io.Writer) {
		table(w, [][2]string{
			{"data", fmt.Sprintf("%s  (A %d×%d, V %d×%d, C %d×%d, E, W, b)", o.Out, o.D, o.K, o.N, o.D, o.N, o.K)},
			{"bias", fmt.Sprintf("%s (μ = E_bΦ(b) = %.4g)", bias.Name(), mu)},
			{"outliers", fmt.Sprintf("%d per observation, magnitude %g·U[0.5,1.5]", o.S, o.Magnitude)},
			{"dense noise", fmt.Sprintf("U[−%g, %g]", o.Delta, o.Delta)},
			{"manifest", manifestList(files)},
			{"time", seconds(time.Since(start))},
		})
	})
}

// ------------------------------------------------------------ recover latent

// recoverOptions are the flags of recover latent, as recorded in the
// manifest: the files, --lambda (auto or a number), and robust.Options (whose
// Bias density is given here as its --bias string).
type recoverOptions struct {
	A      string `json:"a"`
	AName  string `json:"a_name"`
	V      string `json:"v"`
	VName  string `json:"v_name"`
	Lambda string `json:"lambda"`
	robust.Options
	Bias      string `json:"bias,omitempty"`
	Rescale   bool   `json:"rescale,omitempty"`
	Truth     string `json:"truth,omitempty"`
	TruthName string `json:"truth_name,omitempty"`
	Out       string `json:"out"`
	EOut      string `json:"e_out,omitempty"`
	// KnownBias is the file holding the bias vector b (length d) when it is
	// known: the nonlinear known-bias variant runs instead of (47).
	KnownBias     string `json:"known_bias,omitempty"`
	KnownBiasName string `json:"known_bias_name,omitempty"`
}

type recoverResult struct {
	Command         string   `json:"command"`
	Out             string   `json:"out"`
	EOut            string   `json:"e_out,omitempty"`
	N               int      `json:"n"`
	D               int      `json:"d"`
	K               int      `json:"k"`
	Rule            string   `json:"rule"`
	TauMedian       float64  `json:"tau_median"`
	Mu              float64  `json:"mu"`
	Rescaled        bool     `json:"rescaled"`
	AllCertified    bool     `json:"all_certified"`
	MaxStationarity float64  `json:"max_kkt_stationarity"`
	MeanOutliers    float64  `json:"mean_outliers_flagged"`
	MeanIterations  float64  `json:"mean_iterations"`
	SecondsPerSolve float64  `json:"seconds_per_solve"`
	Warnings        []string `json:"warnings"`
	// Against --truth (rows c*): mean ‖ĉ − μc*‖ (or ‖ĉ/μ − c*‖ with
	// --rescale) and mean ‖ĉ/‖ĉ‖ − c*/‖c*‖‖.
	MeanError          *float64       `json:"mean_error,omitempty"`
	MeanDirectionError *float64       `json:"mean_direction_error,omitempty"`
	Seconds            float64        `json:"seconds"`
	Options            recoverOptions `json:"options"`
}

const recoverLatentLong = `Recover, for every row v of V (n×d), the code c (length k) and the sparse
outliers e from v = ReLU(A·c + b) + e + w with A (d×k) known, by the
generalized LASSO (47) of Mazumdar and Rawat,

  (ĉ, ê) = argmin (1/2d)‖v − A·c − e‖² + λ‖e‖₁,

solved exactly as Huber regression with threshold τ = λ·d by semismooth
Newton (every solution is checked against its KKT conditions). ĉ estimates
μ·c* with μ = E_b Φ(b); with --bias and --rescale the output is ĉ/μ.

--lambda auto picks τ by --rule: mad (default; from the data alone) or
plugin (needs --bias and the noise bound --delta). --lambda VALUE fixes λ
(τ = VALUE·d). --out gets C (n×k, .npy), --e-out the outliers E (n×d).

--known-bias B.npy (the bias vector b, length d) switches to the known-bias
variant (not in the paper): the nonlinear Huber problem
Σ H_τ(vᵢ − ReLU(aᵢ·c + bᵢ)) solved by Gauss–Newton with an inlier refit.
It estimates c* itself (no μ) and is exact on noiseless data with sparse
outliers; it is not convex, so its certificate is a stationarity check.`

const recoverLatentExample = `  relurec gen robust --d 4000 --k 10 --n 10 --seed 1 --out rob.npz
  relurec recover latent --a rob.npz --v rob.npz --out C.npy

  # Known bias: rescale to c*, score against the true codes
  relurec recover latent --a A.npy --v V.npy --bias gaussian:0,0.5 --rescale --truth rob.npz --out C.npy --e-out E.npy

  # The bias vector is known (gen robust stores it as "b"): estimate c* itself
  relurec recover latent --a rob.npz --v rob.npz --known-bias rob.npz --truth rob.npz --out C.npy

  # Fixed λ = 5e-4 (τ = λ·d) and the plug-in rule
  relurec recover latent --a A.npy --v V.npy --lambda 5e-4 --out C.npy
  relurec recover latent --a A.npy --v V.npy --rule plugin --bias gaussian:0,0.5 --delta 0.1 --out C.npy`

func newRecoverLatentCmd(a *app) *cobra.Command {
	o := recoverOptions{AName: "A", VName: "V", Lambda: "auto", Options: robust.Options{Rule: robust.RuleMAD, Solver: robust.SolverSSN}, TruthName: "C", KnownBiasName: "b"}
	c := &cobra.Command{
		Use:     "latent",
		Short:   "Recover codes c from v = ReLU(A·c + b) + outliers + noise (generalized LASSO)",
		Long:    recoverLatentLong,
		Example: recoverLatentExample,
		Args:    cobra.NoArgs,
		RunE:    a.leaf(func(cmd *cobra.Command, _ []string) error { return a.runRecoverLatent(cmd, &o) }),
	}
	o.register(c)
	return c
}

func (o *recoverOptions) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.A, "a", "", "known A, d×k (.npy, .csv, or .npz with --a-name); required")
	f.StringVar(&o.AName, "a-name", o.AName, "name of A inside an .npz")
	f.StringVar(&o.V, "v", "", "observations V, n×d, one per row (.npy, .csv, or .npz with --v-name); required")
	f.StringVar(&o.VName, "v-name", o.VName, "name of V inside an .npz")
	f.StringVar(&o.Lambda, "lambda", o.Lambda, "auto (use --rule) or λ > 0 of (47) (τ = λ·d)")
	f.StringVar((*string)(&o.Rule), "rule", string(o.Rule), "threshold rule for --lambda auto: mad or plugin")
	f.StringVar(&o.Bias, "bias", "", "bias density, for μ, --rescale and --rule plugin (e.g. gaussian:0,0.5)")
	f.Float64Var(&o.Delta, "delta", 0, "bound on the dense noise ‖w‖_∞ (--rule plugin)")
	f.StringVar((*string)(&o.Solver), "solver", string(o.Solver), "ssn (semismooth Newton, default), bcd or fista (cross-checks)")
	f.BoolVar(&o.Intercept, "intercept", false, "fit an unpenalised intercept")
	f.BoolVar(&o.Linear, "linear", false, "linear model v = A·c + e + w (μ = 1)")
	f.Float64Var(&o.SparseC, "sparse-c", 0, "λ_c > 0 adds λ_c·‖c‖₁ for sparse codes")
	f.BoolVar(&o.Rescale, "rescale", false, "write ĉ/μ (an estimate of c*) instead of ĉ (needs --bias)")
	f.StringVar(&o.Truth, "truth", "", "true codes (n×k) to score against (.npy, or .npz with --truth-name)")
	f.StringVar(&o.TruthName, "truth-name", o.TruthName, "name of the true codes inside an .npz")
	f.StringVar(&o.Out, "out", "", "output .npy for the codes (n×k); required")
	f.StringVar(&o.EOut, "e-out", "", "optional output .npy for the outliers (n×d)")
	f.StringVar(&o.KnownBias, "known-bias", "", "the known bias vector b, length d (.npy, or .npz with --known-bias-name): estimate c* by the known-bias variant")
	f.StringVar(&o.KnownBiasName, "known-bias-name", o.KnownBiasName, "name of b inside an .npz")
}

// validate checks the flags of recover latent (robust.Options by its
// Validate), sets Options.Bias and Options.Lambda, checks the outputs, and
// returns the input files.
func (o *recoverOptions) validate() ([]string, error) {
	if o.A == "" || o.V == "" {
		return nil, usageErrorf("--a and --v are required")
	}
	if o.Out == "" {
		return nil, usageErrorf("--out is required")
	}
	bias, err := parseBias(o.Bias)
	if err != nil {
		return nil, err
	}
	o.Options.Bias = bias
	if o.Rule != robust.RuleMAD && o.Rule != robust.RulePlugin {
		return nil, usageErrorf("--rule must be mad or plugin, got %q", o.Rule)
	}
	// Validated before --lambda is set: --rule plugin needs --bias even
	// with a fixed λ.
	if err := o.Options.Validate(); err != nil {
		return nil, optionsUsageError(err)
	}
	if o.KnownBias != "" && (o.Rule == robust.RulePlugin || o.Rescale || o.Solver != robust.SolverSSN || o.Intercept || o.Linear || o.SparseC != 0) {
		return nil, usageErrorf("--known-bias cannot be combined with --rule plugin, --rescale, --solver, --intercept, --linear or --sparse-c (it estimates c* itself by its own solver)")
	}
	if o.Rescale && bias == nil && !o.Linear {
		return nil, usageErrorf("--rescale needs --bias (μ depends on the bias density)")
	}
	if !strings.EqualFold(o.Lambda, "auto") {
		lam, err := strconv.ParseFloat(o.Lambda, 64)
		if err != nil || !(lam > 0) || math.IsInf(lam, 0) {
			return nil, usageErrorf("--lambda must be auto or a positive number, got %q", o.Lambda)
		}
		o.Options.Lambda = lam
	}
	inputs := []string{o.A, o.V}
	if o.Truth != "" {
		inputs = append(inputs, o.Truth)
	}
	if o.KnownBias != "" {
		inputs = append(inputs, o.KnownBias)
	}
	if err := checkOutputs(inputs, [3]string{"out", o.Out, ".npy"}, [3]string{"e-out", o.EOut, ".npy"}); err != nil {
		return nil, err
	}
	return inputs, nil
}

// read reads A, V and, with --truth, the true codes, and checks their shapes.
func (o *recoverOptions) read(ctx context.Context) (A, V, truth *mat.Dense, err error) {
	if A, err = readInput(ctx, "A", o.A, o.AName); err != nil {
		return nil, nil, nil, err
	}
	if V, err = readInput(ctx, "V", o.V, o.VName); err != nil {
		return nil, nil, nil, err
	}
	d, k := A.Dims()
	if _, vc := V.Dims(); vc != d {
		return nil, nil, nil, inputErrorf("V has %d columns but A has %d rows: V holds one observation (length d = %d) per row", vc, d, d)
	}
	if o.Truth != "" {
		if truth, err = readInput(ctx, "truth", o.Truth, o.TruthName); err != nil {
			return nil, nil, nil, err
		}
		if r, c := truth.Dims(); r != V.RawMatrix().Rows || c != k {
			return nil, nil, nil, inputErrorf("--truth is %d×%d, want %d×%d (one true code per row of V)", r, c, V.RawMatrix().Rows, k)
		}
	}
	return A, V, truth, nil
}

// runRecoverLatent is recover latent: validate, read, solve, score, write,
// print.
func (a *app) runRecoverLatent(cmd *cobra.Command, o *recoverOptions) error {
	start := time.Now()
	inputs, err := o.validate()
	if err != nil {
		return err
	}
	man, err := a.newManifest("recover latent", *o, 0, inputs...)
	if err != nil {
		return err
	}
	A, V, truth, err := o.read(a.context())
	if err != nil {
		return err
	}
	solveStart := time.Now()
	br, err := a.solveLatent(cmd.Context(), A, V, o)
	if err != nil {
		return err
	}
	solveTime := time.Since(solveStart)
	out, C := summariseLatent(br, A, o, solveTime)
	if truth != nil {
		scale := 1.0
		if !o.Rescale && !math.IsNaN(out.Mu) {
			scale = out.Mu
		}
		me, md := robust.MeanCodeErrors(C, truth, scale)
		out.MeanDirectionError = &md
		if o.Rescale || !math.IsNaN(out.Mu) || o.KnownBias != "" {
			out.MeanError = &me
		}
	}
	outs := []outFile{{o.Out, func(p string) error { return dataio.WriteNPY(p, C) }}}
	if o.EOut != "" {
		outs = append(outs, outFile{o.EOut, func(p string) error { return dataio.WriteNPY(p, br.E) }})
	}
	out.Seconds = time.Since(start).Seconds()
	man.Timings = map[string]float64{"solve": solveTime.Seconds()}
	man.Results = jsonsafe.Finite(out)
	if _, err := a.writeAll(man, outs); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printRecoverLatent(w, o, out) })
}

// solveLatent recovers every row's code by (47), or by the known-bias
// variant with --known-bias, with a progress bar.
func (a *app) solveLatent(ctx context.Context, A, V *mat.Dense, o *recoverOptions) (*robust.BatchResult, error) {
	progress, clear := a.progress()
	defer clear()
	var cb func(done, total int)
	if progress != nil {
		cb = func(done, total int) { progress("recovering codes", done, total) }
	}
	if o.KnownBias == "" {
		return robust.RecoverAll(ctx, A, V, o.Options, cb)
	}
	d, _ := A.Dims()
	b, err := readKnownBias(ctx, o, d)
	if err != nil {
		return nil, err
	}
	kb, err := robust.RecoverKnownBiasAll(ctx, A, V, b, robust.KnownBiasOptions{Tau: o.Options.Lambda * float64(d)}, cb)
	if err != nil {
		return nil, err
	}
	return kb.Batch(), nil
}

// readKnownBias reads --known-bias: a vector of length d (a row or a column).
func readKnownBias(ctx context.Context, o *recoverOptions, d int) ([]float64, error) {
	B, err := readInput(ctx, "known bias", o.KnownBias, o.KnownBiasName)
	if err != nil {
		return nil, err
	}
	r, c := B.Dims()
	if r*c != d || (r != 1 && c != 1) {
		return nil, inputErrorf("--known-bias is %d×%d, want a vector of length d = %d (one bias per row of A)", r, c, d)
	}
	if c == 1 {
		return mat.Col(nil, 0, B), nil
	}
	return append([]float64(nil), B.RawMatrix().Data[:d]...), nil
}

// summariseLatent gathers the per-row results into the command's result and
// returns the codes to write (ĉ/μ with --rescale).
func summariseLatent(br *robust.BatchResult, A *mat.Dense, o *recoverOptions, solveTime time.Duration) (recoverResult, *mat.Dense) {
	d, k := A.Dims()
	n := br.C.RawMatrix().Rows
	out := recoverResult{Command: "recover latent", Out: o.Out, EOut: o.EOut, N: n, D: d, K: k,
		AllCertified: br.AllCertified, MaxStationarity: br.MaxStationarity, Options: *o, Mu: math.NaN(),
		SecondsPerSolve: solveTime.Seconds() / float64(n), Warnings: []string{}}
	taus := make([]float64, n)
	seen := map[string]bool{}
	for i, r := range br.PerRow {
		taus[i] = r.Tau
		out.Rule = r.Rule
		out.Mu = r.Mu
		out.MeanOutliers += float64(r.Outliers) / float64(n)
		out.MeanIterations += float64(r.Iterations) / float64(n)
		for _, w := range r.Warnings {
			if !seen[w] {
				seen[w] = true
				out.Warnings = append(out.Warnings, fmt.Sprintf("row %d: %s", i, w))
			}
		}
	}
	out.TauMedian = medianOf(taus)
	C := br.C
	if o.Rescale {
		C = mat.DenseCopyOf(br.C)
		C.Scale(1/out.Mu, C)
		out.Rescaled = true
	}
	return out, C
}

// printRecoverLatent writes the human table of recover latent.
func printRecoverLatent(w io.Writer, o *recoverOptions, out recoverResult) {
	n, d, k := out.N, out.D, out.K
	cert := fmt.Sprintf("all %d solutions meet their KKT conditions (worst stationarity %.1e)", n, out.MaxStationarity)
	if !out.AllCertified {
		cert = fmt.Sprintf("NOT all solutions meet their KKT conditions (worst stationarity %.1e); see warnings", out.MaxStationarity)
	}
	if o.KnownBias != "" {
		cert = fmt.Sprintf("all %d fits converged to stationary points (worst relative gradient %.1e; the problem is not convex, so this is a local certificate)", n, out.MaxStationarity)
		if !out.AllCertified {
			cert = fmt.Sprintf("NOT all fits converged (worst relative gradient %.1e); see warnings", out.MaxStationarity)
		}
	}
	mu := "unknown (give --bias)"
	if !math.IsNaN(out.Mu) {
		mu = fmt.Sprintf("%.4g", out.Mu)
	}
	if o.KnownBias != "" {
		mu = "not used: with b known, ĉ estimates c* itself"
	}
	rows := [][2]string{
		{"data", fmt.Sprintf("n=%d observations, d=%d, k=%d", n, d, k)},
		{"threshold", fmt.Sprintf("rule %s, median τ = %.4g (λ = τ/d = %.3g)", out.Rule, out.TauMedian, out.TauMedian/float64(d))},
		{"scale μ", mu},
		{"certificate", cert},
		{"outliers flagged", fmt.Sprintf("%.1f per observation on average", out.MeanOutliers)},
		{"solve time", fmt.Sprintf("%.3g s per observation (%d Newton iterations on average)", out.SecondsPerSolve, int(math.Round(out.MeanIterations)))},
	}
	if out.MeanDirectionError != nil {
		s := fmt.Sprintf("mean direction error %.3g", *out.MeanDirectionError)
		if out.MeanError != nil {
			target := "μ·c*"
			if o.Rescale || o.KnownBias != "" {
				target = "c*"
			}
			s += fmt.Sprintf(", mean ‖ĉ − %s‖ = %.3g", target, *out.MeanError)
		}
		rows = append(rows, [2]string{"vs truth", s})
	}
	rows = append(rows, labelled("warnings", out.Warnings)...)
	rows = append(rows, [2]string{"codes", o.Out})
	table(w, rows)
}

func uniq(xs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
