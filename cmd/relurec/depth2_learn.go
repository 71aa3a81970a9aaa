package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/learner"
	"github.com/relurec/relurec/nn"
)

const learnDepth2Long = `Learn a depth-2 ReLU network with biases, y = A·ReLU(W·x + b) + c, from
samples X (n×d, standard Gaussian inputs) and Y (n×p), with the Hermite-moment
algorithms of Awasthi, Tang and Vijayaraghavan: moments up to order 2ℓ+2 (the
dimension first reduced to m through the order-2 moment), Jennrich's algorithm
on two consecutive orders, the scalar recovery and, for ℓ = 1, the sign fix
from the first moment. A local least-squares refinement (not in the paper)
then makes the answer exact on noiseless data, with a residual certificate
‖Y − f(X)‖/‖Y‖ ≤ --cert-tol.

Routes: "auto" (moments, least squares, refinement), "exact" (fails unless
the certificate holds), "moments" (the paper's moment estimate only),
"improper" (Algorithm 5: moment units plus an affine term by least squares).
--order 2 handles more units than inputs (m ≤ d(d+1)/2; needs --hidden), up
to the sign flip (w, b) → (−w, −b) of each unit, which the refinement
resolves when the network has no affine part.

The model is written atomically as safetensors with PyTorch nn.Sequential
keys (0.weight = W, 0.bias = b, 2.weight = A, 2.bias = c) and provenance in
the metadata, or as ONNX (opset 13, the same names) when --out ends in .onnx,
plus <out>.manifest.json. An affine term, if kept, is stored
exactly as pairs of units (ReLU(z) − ReLU(−z) = z).

` + notCertifiedHelp

const learnDepth2Example = `  # Learn from one .npz holding X and Y; the width is inferred
  relurec learn depth2 --data data.npz --out model.safetensors

  # Separate files, known width, the paper's moment estimate only
  relurec learn depth2 --x X.npy --y Y.npy --hidden 5 --route moments --approximate --out moments.safetensors

  # Overcomplete: 7 units in 4 dimensions
  relurec learn depth2 --x X.npy --y Y.npy --hidden 7 --order 2 --out model.safetensors

  # Noisy outputs: the best fit, written although not certified (exit status 3)
  relurec learn depth2 --data noisy.npz --approximate --out model.safetensors

` + torchLoadExample

// learnDepth2Options are the flags of learn depth2, as recorded in the
// manifest: the data flags, the learner's options and the output.
type learnDepth2Options struct {
	X     string `json:"x,omitempty"`
	Y     string `json:"y,omitempty"`
	Data  string `json:"data,omitempty"`
	XName string `json:"x_name,omitempty"`
	YName string `json:"y_name,omitempty"`
	depth2.Options
	Out         string `json:"out"`
	DType       string `json:"dtype"`
	Approximate bool   `json:"approximate"`
}

type learnDepth2Result struct {
	Command     string             `json:"command"`
	Learner     *learner.Choice    `json:"learner,omitempty"`
	Out         string             `json:"out"`
	Samples     int                `json:"samples"`
	D           int                `json:"d"`
	Outputs     int                `json:"outputs"`
	Hidden      int                `json:"hidden"`
	SavedUnits  int                `json:"saved_units"`
	Route       string             `json:"route"`
	Reason      string             `json:"reason"`
	Certificate depth2.Certificate `json:"certificate"`
	Diagnostics depth2.Diagnostics `json:"diagnostics"`
	// Streamed is set when the data were larger than the memory budget.
	Streamed *streamReport `json:"streamed,omitempty"`
	Outcome
	Seconds  float64            `json:"seconds"`
	Timings  map[string]float64 `json:"timings"`
	Options  learnDepth2Options `json:"options"`
	Manifest string             `json:"manifest,omitempty"`
}

func newLearnDepth2Cmd(a *app) *cobra.Command {
	var df dataFlags
	opt := learnDepth2Options{Options: depth2.Options{Route: depth2.RouteAuto}, DType: "f64"}
	c := &cobra.Command{
		Use:     "depth2",
		Short:   "Learn y = A·ReLU(W·x + b) + c from samples with Hermite moments (exact when noiseless)",
		Long:    learnDepth2Long,
		Example: learnDepth2Example,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runLearnDepth2(cmd, &df, opt)
		}),
	}
	df.register(c)
	f := c.Flags()
	f.IntVar(&opt.Hidden, "hidden", 0, "hidden units m (0 = infer from the order-2 moment; required with --order 2)")
	f.IntVar(&opt.Order, "order", 0, "moment order ℓ: 1 (m ≤ d), 2 (overcomplete, m ≤ d(d+1)/2); 0 = from --hidden")
	f.StringVar((*string)(&opt.Route), "route", string(opt.Route), "auto, exact, moments or improper")
	f.BoolVar(&opt.Affine, "affine", false, "keep an affine term in the model (Algorithm 5's form)")
	f.Float64Var(&opt.CertTol, "cert-tol", 0, "relative residual that certifies exact recovery (0 = 1e-10)")
	f.Uint64Var(&opt.Seed, "seed", 0, "random seed for the learner's random choices")
	f.StringVar(&opt.Out, "out", "", "output model file (.safetensors or .onnx); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	f.BoolVar(&opt.Approximate, "approximate", false, approximateHelp)
	return c
}

// runLearnDepth2 is learn depth2: validate the flags, read the data, fit,
// write the model and its manifest, print.
func (a *app) runLearnDepth2(cmd *cobra.Command, df *dataFlags, opt learnDepth2Options) error {
	run := learnRun{command: "learn depth2", start: time.Now()}
	if err := opt.validate(df); err != nil {
		return err
	}
	man, err := a.newManifest(run.command, opt, opt.Seed, df.paths()...)
	if err != nil {
		return err
	}
	run.man = man
	if run.x, run.y, err = df.read(a.context()); err != nil {
		return err
	}
	run.read = time.Since(run.start)
	progress, clear := a.progress()
	fitStart := time.Now()
	fopt := opt.Options
	fopt.Progress = progress
	res, err := depth2.Fit(cmd.Context(), run.x, run.y, fopt)
	clear()
	if err != nil {
		return err
	}
	run.fit = time.Since(fitStart)
	return a.finishDepth2(cmd, run, opt, res)
}

// finishDepth2 writes and prints a depth-2 answer.
func (a *app) finishDepth2(cmd *cobra.Command, run learnRun, opt learnDepth2Options, res *depth2.Result) error {
	mlp := res.Model.MLP()
	out := newLearnDepth2Result(run, opt, res, mlp)
	unrefined := ""
	if res.Route != depth2.RouteRefined {
		unrefined = "the default --route auto refines it by least squares"
	}
	var notCertified error
	out.Outcome, notCertified = judge(run.x, run.y, mlp, out.Hidden, res.Certificate, res.Warnings, opt.Approximate, unrefined)
	out.Timings = run.timings()
	run.man.Timings = out.Timings
	run.man.Results = jsonsafe.Finite(map[string]any{
		"learner": run.choice, "route": res.Route, "reason": res.Reason, "hidden": out.Hidden, "saved_units": out.SavedUnits,
		"certificate": res.Certificate, "diagnostics": res.Diagnostics, "warnings": out.Warnings, "notes": out.Notes, "diagnosis": out.Diagnosis,
	})
	if out.Written {
		if err := a.writeModel(run.man, opt.Out, mlp, out.metadata(res), opt.DType, out.Timings); err != nil {
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

// validate checks the flags of learn depth2 before any input is read: the
// data flags, the learner's options (depth2.Options.Validate, reported as a
// usage error), the dtype and the output path.
func (opt *learnDepth2Options) validate(df *dataFlags) error {
	if err := df.validate(); err != nil {
		return err
	}
	opt.X, opt.Y, opt.Data, opt.XName, opt.YName = df.x, df.y, df.data, df.xName, df.yName
	if err := opt.Options.Validate(); err != nil {
		return optionsUsageError(err)
	}
	return checkModelOut(&opt.DType, opt.Out, df.paths()...)
}

// newLearnDepth2Result is learn depth2's result before timings; mlp is the
// model as saved.
func newLearnDepth2Result(run learnRun, opt learnDepth2Options, res *depth2.Result, mlp *nn.MLP) learnDepth2Result {
	_, d := run.x.Dims()
	_, p := run.y.Dims()
	return learnDepth2Result{
		Command: run.command, Learner: run.choice, Out: opt.Out, Samples: run.samples(), D: d, Outputs: p, Streamed: run.stream.report(),
		Hidden: res.Diagnostics.Hidden, SavedUnits: mlp.Layers[0].Out(), Route: res.Route, Reason: res.Reason,
		Certificate: res.Certificate, Diagnostics: res.Diagnostics, Options: opt, Manifest: dataio.ManifestPath(opt.Out),
	}
}

// metadata is the model file's provenance.
func (out *learnDepth2Result) metadata(res *depth2.Result) map[string]string {
	return map[string]string{
		"producer":             "relurec " + out.Command,
		"learner":              string(learner.Depth2),
		"relurec_version":      relurecVersion(),
		"route":                res.Route,
		"reason":               res.Reason,
		"certificate_residual": strconv.FormatFloat(res.Certificate.Residual, 'g', -1, 64),
		"certificate_tol":      strconv.FormatFloat(res.Certificate.Tol, 'g', -1, 64),
		"certificate_met":      strconv.FormatBool(res.Certificate.Met),
		"seed":                 strconv.FormatUint(out.Options.Seed, 10),
		"hidden":               strconv.Itoa(out.Hidden),
		"affine_pairs":         strconv.Itoa(max(out.SavedUnits-out.Hidden, 0) / 2),
		"order_ell":            strconv.Itoa(res.Diagnostics.Ell),
		"samples":              strconv.Itoa(out.Samples),
	}
}

// rows is learn depth2's human table.
func (out *learnDepth2Result) rows(res *depth2.Result, fitTime time.Duration) [][2]string {
	cert := certificateText(res.Certificate)
	units := strconv.Itoa(out.Hidden)
	if res.Diagnostics.HiddenInferred {
		units += " (inferred from the order-2 moment)"
	}
	if out.SavedUnits > out.Hidden {
		units += fmt.Sprintf("; saved as %d units (affine term as pairs)", out.SavedUnits)
	}
	rows := [][2]string{
		{"data", fmt.Sprintf("n=%d, d=%d, outputs=%d", out.Samples, out.D, out.Outputs)},
	}
	rows = append(rows, out.Streamed.tableRow()...)
	rows = append(rows, learnerRows(out.Learner)...)
	rows = append(rows, [][2]string{
		{"route", res.Route},
		{"reason", res.Reason},
		{"order ℓ", strconv.Itoa(res.Diagnostics.Ell)},
		{"hidden units", units},
		{"moment estimate", fmt.Sprintf("relative residual %.3g", res.Diagnostics.MomentResidual)},
		{"certificate", cert},
	}...)
	return append(rows, out.Outcome.rows(fmt.Sprintf("%.2f s (fit %.2f s)", out.Seconds, fitTime.Seconds()), out.Out, out.Options.DType, out.Manifest)...)
}
