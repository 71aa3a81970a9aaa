package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/learner"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/twolayer"
)

// learnTwoLayerOptions are the flags of learn twolayer, as recorded in the
// manifest: the data flags, the learner's options and the output.
type learnTwoLayerOptions struct {
	X     string `json:"x,omitempty"`
	Y     string `json:"y,omitempty"`
	Data  string `json:"data,omitempty"`
	XName string `json:"x_name,omitempty"`
	YName string `json:"y_name,omitempty"`
	twolayer.Options
	Out         string `json:"out"`
	DType       string `json:"dtype"`
	Approximate bool   `json:"approximate"`
}

// learnResult is what learn twolayer prints and stores in the manifest.
type learnResult struct {
	Command     string               `json:"command"`
	Learner     *learner.Choice      `json:"learner,omitempty"`
	Out         string               `json:"out"`
	Samples     int                  `json:"samples"`
	D           int                  `json:"d"`
	M           int                  `json:"m"`
	Hidden      int                  `json:"hidden"`
	Route       string               `json:"route"`
	Reason      string               `json:"reason"`
	Certificate twolayer.Certificate `json:"certificate"`
	Diagnostics twolayer.Diagnostics `json:"diagnostics"`
	// Streamed is set when the data were larger than the memory budget.
	Streamed *streamReport `json:"streamed,omitempty"`
	Outcome
	Seconds  float64              `json:"seconds"`
	Timings  map[string]float64   `json:"timings"`
	Options  learnTwoLayerOptions `json:"options"`
	Manifest string               `json:"manifest,omitempty"`
}

const learnTwoLayerLong = `Learn a two-layer ReLU network Y ≈ ReLU(X·Vᵀ)·Uᵀ (V k×d, U m×k, no biases)
from samples X (n×d) and Y (n×m) with the algorithms of Bakshi, Jayaram and
Woodruff. Exact routes only return a network whose residual certificate
‖Y − f(X)‖/‖Y‖ ≤ --cert-tol holds.

Routes (--route):
  auto       (default) choose from the data, and say why: exact from the
             parity start first when X looks Gaussian and Y is exactly rank
             k (the cheapest route that can certify); if it does not
             certify: worstcase when X is not Gaussian or n is small, fpt
             when Y shows more units than its rank, ica when V looks
             orthonormal, exact from the tensor start, sparse when Y's
             residual is a few large entries, noisy otherwise (--start
             tensor skips the first step: the paper's choice)
  exact      start + exact polish (Alg 5); Gaussian X; fails unless the
             certificate holds. The ReLU starts from the zero-set start
             (the sparsest directions of col(Y); not in the paper), the
             parity start (second moments; k ≤ 40), the tensor start (order-4
             Hermite moment, Jennrich; Alg 4) if it fails; --start tensor
             runs the paper's start only
  noisy      tensor start + sign recovery (Alg 6) + least-squares U;
             --refine adds a local least-squares refinement
  ica        FastICA + exact polish (Alg 3); Gaussian X, orthonormal V
  fpt        positively collinear outputs (Alg 7); U may lack full column
             rank, even m < k; needs n ≥ 4·d·2^k
  worstcase  sign patterns + linear programs (Alg 1–2); any X, exponential
             in k: refused above a work limit unless --force
  sparse     robust PCA, then exact; a few entries of Y arbitrarily corrupted
             (§8); U by row-wise ℓ1 regression

Data larger than memory: when --x and --y are .npy files whose float64
values together exceed --max-memory, learn reads them by rows. It fits a
random sample of the rows (ten times the exact route's floor
max(2000, 30·k, 4·d), at least 100 000; --seed draws it) and certifies the
answer on all rows in a second pass over the files, holding the sample and
one block of rows (docs/scale.md).

The model is written atomically to --out as safetensors with PyTorch
nn.Sequential keys (0.weight = V, 2.weight = U) and provenance (route,
certificate, seed, version) in the metadata, or as ONNX (opset 13, the same
names and metadata) when --out ends in .onnx, plus <out>.manifest.json. On
any error nothing is written.

` + notCertifiedHelp

const learnTwoLayerExample = `  # Learn from one .npz holding X and Y; k is inferred from the rank of Y
  relurec learn twolayer --data data.npz --out model.safetensors

  # Separate files, known k, noisy data with refinement, float32 weights;
  # noisy data are not certified: --approximate writes the model (exit status 3)
  relurec learn twolayer --x X.npy --y Y.npy --hidden 5 --route noisy --refine --approximate --dtype f32 --out model.safetensors

  # An X/Y pair larger than 2 GB: fitted on a sample, certified on every row
  relurec --max-memory 2GB learn twolayer --x X.npy --y Y.npy --out model.safetensors

  # Tiny non-Gaussian data: the worst-case route (any X)
  relurec learn twolayer --x X.npy --y Y.npy --route worstcase --out model.safetensors

` + torchLoadExample

func newLearnTwoLayerCmd(a *app) *cobra.Command {
	var df dataFlags
	opt := learnTwoLayerOptions{Options: twolayer.Options{Route: twolayer.UseAuto, Whiten: twolayer.WhitenAuto}, DType: "f64"}
	c := &cobra.Command{
		Use:     "twolayer",
		Short:   "Learn V and U of Y = ReLU(X·Vᵀ)·Uᵀ from samples (exact when noiseless)",
		Long:    learnTwoLayerLong,
		Example: learnTwoLayerExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runLearnTwoLayer(cmd, "learn twolayer", &df, opt)
		}),
	}
	df.register(c)
	f := c.Flags()
	f.IntVar(&opt.Hidden, "hidden", 0, "hidden units k (0 = infer from the numerical rank of Y; needs k ≤ m)")
	f.StringVar((*string)(&opt.Route), "route", string(opt.Route), routeFlagList()+" (see above)")
	f.BoolVar(&opt.Force, "force", false, "let the worstcase route run above its work limit")
	f.BoolVar(&opt.Refine, "refine", false, "refine the noisy-route estimate by local least squares")
	f.StringVar((*string)(&opt.Whiten), "whiten", string(opt.Whiten), "whiten non-identity input covariance: auto, always or never")
	f.StringVar((*string)(&opt.Start), "start", string(twolayer.StartAuto), "the exact route's start: auto (the zero-set start for the ReLU, then the parity start; docs/twolayer.md), parity (the parity start first) or tensor (the paper's tensor start)")
	f.Float64Var(&opt.CertTol, "cert-tol", 0, "relative residual that certifies exact recovery (0 = 1e-10)")
	f.Uint64Var(&opt.Seed, "seed", 0, "random seed for the learner's random choices")
	f.StringVar(&opt.Out, "out", "", "output model file (.safetensors or .onnx); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	f.StringVar((*string)(&opt.Activation), "activation", "relu", activationHelp)
	f.BoolVar(&opt.Approximate, "approximate", false, approximateHelp)
	return c
}

// routeFlagList is twolayer.Routes as "auto, exact, …" for --help.
func routeFlagList() string {
	names := make([]string, len(twolayer.Routes))
	for i, r := range twolayer.Routes {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// runLearnTwoLayer is learn twolayer and, with command "learn" and the
// two-layer options at their defaults, the front door: validate the flags,
// read the data, let learner.Fit choose and run the learner (a named route
// or a non-ReLU activation keeps the two-layer one), write the model and its
// manifest, print.
func (a *app) runLearnTwoLayer(cmd *cobra.Command, command string, df *dataFlags, opt learnTwoLayerOptions) error {
	run := learnRun{command: command, start: time.Now()}
	if err := opt.validate(df); err != nil {
		return err
	}
	man, err := a.newManifest(command, opt, opt.Seed, df.paths()...)
	if err != nil {
		return err
	}
	run.man = man
	progress, clear := a.progress()
	defer clear()
	// .npy data larger than the memory budget are fitted on a sample of
	// their rows and certified on all of them (learn_stream.go).
	if run.stream, err = openStreamed(df); err != nil {
		return err
	}
	if run.stream != nil {
		defer run.stream.close()
		if run.x, run.y, err = run.stream.sample(a.context(), opt.Hidden, opt.Seed, progress); err != nil {
			return err
		}
		limitHeapToData(run.x, run.y)
	} else if run.x, run.y, err = df.read(a.context()); err != nil {
		return err
	}
	run.read = time.Since(run.start)
	fitStart := time.Now()
	lo := learner.Options{Options: opt.Options}
	lo.Progress = progress
	res, err := learner.Fit(cmd.Context(), run.x, run.y, lo)
	if err != nil {
		return err
	}
	run.fit = time.Since(fitStart)
	if run.stream != nil {
		if err := run.stream.recertify(a.context(), res, progress); err != nil {
			return err
		}
	}
	clear()
	run.choice = &res.Choice
	if res.Depth2 != nil {
		return a.finishDepth2(cmd, run, opt.asDepth2(), res.Depth2)
	}
	return a.finishTwoLayer(cmd, run, opt, res.TwoLayer)
}

// finishTwoLayer writes and prints a two-layer answer.
func (a *app) finishTwoLayer(cmd *cobra.Command, run learnRun, opt learnTwoLayerOptions, res *twolayer.Result) error {
	// The library's notes name options; the user reads flags.
	warnings := flagTexts(res.Warnings, cmd)
	if sel := res.Diagnostics.Selection; sel != nil {
		withFlagTexts(sel.Considered, cmd)
	}
	out := newLearnResult(run, opt, res)
	unrefined := ""
	if res.Route == twolayer.RouteNoisy && res.Diagnostics.RefineIterations == 0 {
		unrefined = "--refine fits it by least squares"
	}
	var notCertified error
	out.Outcome, notCertified = judge(run.x, run.y, res.Model, out.Hidden, res.Certificate, warnings, opt.Approximate, unrefined)
	out.Timings = run.timings()
	run.man.Timings = out.Timings
	run.man.Results = jsonsafe.Finite(map[string]any{
		"learner": run.choice, "route": res.Route, "reason": res.Reason, "hidden": out.Hidden,
		"certificate": res.Certificate, "diagnostics": res.Diagnostics, "warnings": out.Warnings, "notes": out.Notes, "diagnosis": out.Diagnosis,
	})
	if out.Written {
		if err := a.writeModel(run.man, opt.Out, res.Model, out.metadata(res), opt.DType, out.Timings); err != nil {
			return err
		}
	} else {
		out.Manifest = ""
	}
	out.Seconds = time.Since(run.start).Seconds()
	if err := a.emit(out, func(w io.Writer) { table(w, out.rows(res, run.fit)) }); err != nil {
		return err
	}
	return notCertified
}

// asDepth2 is the depth-2 learner's record of these flags, for the answer
// the front door took from it.
func (opt learnTwoLayerOptions) asDepth2() learnDepth2Options {
	return learnDepth2Options{
		X: opt.X, Y: opt.Y, Data: opt.Data, XName: opt.XName, YName: opt.YName,
		Options: depth2.Options{Hidden: opt.Hidden, CertTol: opt.CertTol, Seed: opt.Seed, Route: depth2.RouteAuto},
		Out:     opt.Out, DType: opt.DType, Approximate: opt.Approximate,
	}
}

// validate checks the flags of learn twolayer before any input is read: the
// data flags, the learner's options (twolayer.Options.Validate, reported as a
// usage error), the dtype and the output path.
func (opt *learnTwoLayerOptions) validate(df *dataFlags) error {
	if err := df.validate(); err != nil {
		return err
	}
	opt.X, opt.Y, opt.Data, opt.XName, opt.YName = df.x, df.y, df.data, df.xName, df.yName
	act, err := parseActivationFlag(string(opt.Activation))
	if err != nil {
		return err
	}
	opt.Activation = act
	if err := opt.Options.Validate(); err != nil {
		return optionsUsageError(err)
	}
	return checkModelOut(&opt.DType, opt.Out, df.paths()...)
}

// newLearnResult is learn twolayer's result before timings.
func newLearnResult(run learnRun, opt learnTwoLayerOptions, res *twolayer.Result) learnResult {
	_, d := run.x.Dims()
	_, m := run.y.Dims()
	out := learnResult{
		Command: run.command, Learner: run.choice, Out: opt.Out, Samples: run.samples(), D: d, M: m, Streamed: run.stream.report(),
		Hidden: res.Diagnostics.Hidden, Route: res.Route, Reason: res.Reason,
		Certificate: res.Certificate, Diagnostics: res.Diagnostics, Options: opt,
		Manifest: dataio.ManifestPath(opt.Out),
	}
	if out.Hidden == 0 && res.Model != nil && len(res.Model.Layers) > 0 {
		out.Hidden = res.Model.Layers[0].Out()
	}
	return out
}

// metadata is the model file's provenance.
func (out *learnResult) metadata(res *twolayer.Result) map[string]string {
	return map[string]string{
		"producer":             "relurec " + out.Command,
		"learner":              string(learner.TwoLayer),
		"relurec_version":      relurecVersion(),
		"route":                res.Route,
		"reason":               res.Reason,
		"certificate_residual": strconv.FormatFloat(res.Certificate.Residual, 'g', -1, 64),
		"certificate_tol":      strconv.FormatFloat(res.Certificate.Tol, 'g', -1, 64),
		"certificate_met":      strconv.FormatBool(res.Certificate.Met),
		"seed":                 strconv.FormatUint(out.Options.Seed, 10),
		"hidden":               strconv.Itoa(out.Hidden),
		"samples":              strconv.Itoa(out.Samples),
	}
}

// rows is learn twolayer's human table.
func (out *learnResult) rows(res *twolayer.Result, fitTime time.Duration) [][2]string {
	cert := certificateText(res.Certificate)
	k := strconv.Itoa(out.Hidden)
	if res.Diagnostics.HiddenInferred {
		k += " (inferred from the data; see the reason)"
	}
	rows := [][2]string{
		{"data", fmt.Sprintf("n=%d, d=%d, m=%d", out.Samples, out.D, out.M)},
	}
	rows = append(rows, out.Streamed.tableRow()...)
	rows = append(rows, learnerRows(out.Learner)...)
	route := res.Route
	if route == twolayer.RouteExact && res.Diagnostics.Start != "" {
		// The route keeps its name for scripts; the table says what ran.
		route = res.Diagnostics.Start + " start + exact polish"
	}
	rows = append(rows, [][2]string{
		{"route", route},
		{"reason", res.Reason},
		{"hidden units k", k},
		{"certificate", cert},
	}...)
	if sel := res.Diagnostics.Selection; sel != nil {
		rows = append(rows, labelled("routes considered", errs.Strings(sel.Considered))...)
	}
	if res.Diagnostics.Whitened {
		rows = append(rows, [2]string{"inputs", fmt.Sprintf("whitened (κ of the sample covariance %.3g)", res.Diagnostics.CondCovariance)})
	}
	return append(rows, out.Outcome.rows(fmt.Sprintf("%.2f s (fit %.2f s)", out.Seconds, fitTime.Seconds()), out.Out, out.Options.DType, out.Manifest)...)
}
