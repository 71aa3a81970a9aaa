package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/jsonsafe"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

// compressOptions are the flags of compress, as recorded in the manifest.
type compressOptions struct {
	Model        string              `json:"model"`
	Calib        string              `json:"calib,omitempty"`
	CalibName    string              `json:"calib_name,omitempty"`
	Data         string              `json:"data,omitempty"`
	CalibSamples int                 `json:"calib_samples"`
	Holdout      string              `json:"holdout,omitempty"`
	Fast         bool                `json:"fast,omitempty"`
	Method       compress.Method     `json:"method"`
	Sequential   bool                `json:"sequential"`
	Keep         float64             `json:"keep,omitempty"`
	Ranks        []int               `json:"ranks,omitempty"`
	Energy       float64             `json:"energy,omitempty"`
	TargetError  float64             `json:"target_error,omitempty"`
	Allocation   compress.Allocation `json:"allocation"`
	Bias         compress.BiasMode   `json:"bias"`
	Route        compress.Route      `json:"route"`
	Ridge        float64             `json:"ridge"`
	Distill      int                 `json:"distill,omitempty"`
	DistillAuto  bool                `json:"distill_auto,omitempty"`
	DistillLR    float64             `json:"distill_lr,omitempty"`
	// AutoMaxKeep is the preset's compress.Options.AutoMaxKeep (no flag).
	AutoMaxKeep float64 `json:"auto_max_keep,omitempty"`
	Out         string  `json:"out"`
	DType       string  `json:"dtype"`
}

// compressResult is what compress prints and stores in the manifest.
type compressResult struct {
	Command string `json:"command"`
	compress.Result
	// Modules says what each compressed module of a CNN or a graph was
	// fit on (compress.CNNModule, compress.GraphModule).
	Modules any `json:"modules,omitempty"`
	// Accuracy of the original and compressed models on the test split
	// (with --data fashion-mnist).
	Original   *nn.Metrics `json:"original,omitempty"`
	Compressed *nn.Metrics `json:"compressed,omitempty"`
	// Estimate is what compress expected the compression to cost,
	// printed before it started (MLPs).
	Estimate *compress.Cost     `json:"estimate,omitempty"`
	Seconds  float64            `json:"seconds"`
	Timings  map[string]float64 `json:"timings"`
	Options  compressOptions    `json:"options"`
	Out      string             `json:"out"`
	Manifest string             `json:"manifest"`
}

const compressLong = `Replace every Linear layer of a trained ReLU MLP by a low-rank factorization
(two consecutive Linear layers; a CNN's convs too, below), fitted on
calibration inputs without labels (Zhang & Saab, "Theoretical guarantees for
low-rank compression of deep neural networks").

Without flags it runs the best measured recipe for the budget: the
data-driven fit, sequential for an MLP or an ONNX graph (--sequential),
and for an MLP keeping at most 25% of its parameters (a graph: 50%) the
budget split by measured sensitivity (--allocation auto) and 30 epochs of
distillation (a graph: 10; --distill); above, where they were measured to
gain nothing on MLPs, the global allocation alone. On three PyTorch-trained
Fashion-MNIST 784-512-256-10 MLPs at keep 0.05 it lost 1.6 points of test
accuracy where --fast lost 10.6, in 2-3× the time (docs/compress.md); the
estimated time is printed before it starts. --fast is the cheap path: every
layer fit once on the original activations, global allocation, no
distillation. Any flag given overrides either preset.

Methods (--method):
  data        rank-constrained least squares on the layer's outputs (Alg 2,
              Theorem 3.1), with a dense re-fitted bias (Alg 2c); the default
  svd         truncated SVD of the weights (Alg 1), blind to data
  asvd        ASVD's activation-scaled SVD
  svd-llm     SVD-LLM's whitening (= data with the original activations)
  svd-llm-v2  SVD-LLM V2's two-round SVD truncation: the same minimum as
              svd-llm, with an eigendecomposition instead of Cholesky
  output-pca  PCA of the layer's outputs (AFM / DRONE style)
  input-pca   PCA of the layer's inputs (Alg 7, a comparison point)
  convex      nuclear + max-norm constrained least squares (Alg 4), then rank r
  relu        ReLU-aware censored-Gaussian estimator (Alg 5), then rank r
--sequential (the default for an MLP or a graph; --sequential=false or --fast
turns it off) fits each layer on the compressed network's own inputs (Alg 3); with --method
data a layer kept dense is then refit by least squares on those inputs
("refit" in the rank column), at no cost in parameters.

Ranks (one of): --keep F keeps at most ⌊F·P⌋ of the P parameters (every
weight and bias counted; the budget is printed), --ranks r1,r2,… (0 keeps a
layer dense), --energy E, --target-error T (relative layer error). A layer
whose rank would not save parameters stays dense.

Allocation of --keep over layers (--allocation):
  auto         sensitivity for an MLP at --keep ≤ 0.25, else global (default)
  global       the next rank goes where the layer's next singular direction
               removes the most of that layer's energy per parameter (--fast)
  uniform      every layer keeps the same fraction of its parameters
  sensitivity  measured: the network's output error on the calibration data
               with each layer alone compressed (later layers refit with
               --sequential), on a grid of ranks refined where the ranks
               land, then greedy by error removed per parameter (end-to-end;
               about 4× the time of global)
  asvd-search  baseline, ASVD's sensitivity search on the same measurements:
               every layer at the smallest rank under a common error threshold
  svd-llm-v2   baseline, SVD-LLM V2: within each group of same-type matrices
               (same name but the block index, same shape) removed fractions
               ∝ 1/log(theoretical truncation loss), the group at the uniform
               ratio; an MLP of distinct widths gets the uniform ratio
               (with --method svd-llm-v2 --fast: the paper's whole method)

Calibration: --calib X.npy (rows are samples; .npy, .npz, .csv or IDX) or
--data fashion-mnist (the first --calib-samples training images; the test
images are then the held-out set and accuracy before/after is reported).
An MLP is calibrated on 40 000 rows by default (10 000 with --fast): the
recipe's distillation gains most from the extra rows.
The report lists per layer the rank, parameters, and the relative error
‖Ỹ − Ŷ‖/‖Ỹ‖ of its pre-activations on the calibration and held-out data.

--distill N (MLPs and ONNX graphs) adds a step the paper does not have: after
the layer fit, N epochs of Adam fit the whole compressed network to the
original network's output on the same calibration inputs (knowledge
distillation, still no labels), keeping the epoch that best matches the
original on the last 10% of the calibration rows — the layer fit itself if
none does. An MLP's weights and biases are fit to the original's tempered
softmax; a graph's factors and their biases (its other constants stay) to
its outputs by squared error, with gradients back-propagated through every
node (attention, LayerNorm, GELU). At small budgets it recovers much of what
the layers lose together (docs/compress.md); 30 epochs add about 10 s at
keep 0.05 on the Fashion-MNIST MLP. Without --distill, 30 epochs run when
an MLP or a graph keeps at most 25% of its parameters (above that they were
measured to change nothing on MLPs; a ViT at keep 0.3 gained 1 point from
--distill 10, docs/compress.md); --distill N runs N epochs whatever
the budget, --distill 0 none.

--model is safetensors (nn.Sequential keys) or ONNX (torch.onnx.export of an
nn.Sequential of Linear/ReLU). A convolutional network (Conv2d, ReLU,
MaxPool2d, Flatten, Linear, as ONNX or relurec's CNN safetensors) is
compressed the same way: each conv as its Out × In·KH·KW matrix fitted on a
sample of its unfolded input patches, written back as a KH×KW conv to r
channels then a 1×1 conv (--allocation global, uniform or svd-llm-v2; 4096
calibration images by default). An ONNX graph with residual, mixer or
transformer blocks (attention, LayerNormalization, GELU, the shape
arithmetic of a dynamic batch; torch.onnx.export, opset 13-17) is compressed
weight by weight: every MatMul or Gemm by a constant weight (Q, K, V, output
projection, MLP) fitted on the activations that reach it (every axis but the
last as rows, e.g. images × tokens), written back as two MatMul nodes in the
file's opset (ONNX out only; 4096 calibration samples by default; the
measured allocations run the graph on 256 of them per measurement). The compressed model is written atomically to
--out, as safetensors or ONNX by its extension (.safetensors or .onnx), plus
<out>.manifest.json; on error nothing is written.`

const compressExample = `  # Keep 5% of the parameters with the best measured recipe (sequential fit,
  # sensitivity allocation, distillation); the time it takes is printed first
  relurec compress --model mlp.safetensors --data fashion-mnist --keep 0.05 --out tiny.safetensors

  # The cheap path: each layer fit once, global allocation, no distillation
  relurec compress --model mlp.safetensors --data fashion-mnist --keep 0.1 --fast --out small.safetensors

  # Load the result in PyTorch (examples/load_compressed.py)
  python3 -c 'from load_compressed import load_relurec; print(load_relurec("tiny.safetensors"))'

  # Your own calibration inputs and a baseline, ranks chosen per layer
  relurec compress --model mlp.safetensors --calib X.npy --ranks 32,32,0 --method svd --out svd.safetensors

  # A model exported from PyTorch with torch.onnx.export
  relurec compress --model mlp.onnx --calib X.npy --keep 0.5 --out small.safetensors

  # A CNN exported from PyTorch (bench/cnn_fashion.py), written back as ONNX
  relurec compress --model cnn.onnx --data fashion-mnist --keep 0.25 --out small.onnx

  # A 2-block MLP-mixer on image rows (bench/mixer_fashion.py)
  relurec compress --model mixer.onnx --data fashion-mnist --keep 0.5 --out small.onnx

  # A small ViT (bench/vit_fashion.py) at 30% of its parameters, its factors
  # then distilled to the ViT's outputs for 10 epochs
  relurec compress --model vit.onnx --data fashion-mnist --keep 0.3 --sequential \
      --allocation sensitivity --distill 10 --out small.onnx`

func newCompressCmd(a *app) *cobra.Command {
	def := compress.DefaultOptions(&nn.MLP{}) // the flags' defaults; preset applies the model's
	opt := compressOptions{CalibName: "X", CalibSamples: fastCalibRows, Method: def.Method, Sequential: def.Sequential, Allocation: def.Allocation,
		Distill: def.Distill.Epochs, Bias: compress.BiasCenter, Route: compress.RouteAuto, DType: "f64"}
	var ranks string
	c := &cobra.Command{
		Use:     "compress",
		Short:   "Compress a trained MLP, CNN or ONNX graph to low rank from unlabelled calibration data",
		Long:    compressLong,
		Example: compressExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runCompress(cmd, opt, ranks)
		}),
	}
	f := c.Flags()
	f.StringVar(&opt.Model, "model", "", "the trained model (.safetensors or .onnx); required")
	f.StringVar(&opt.Calib, "calib", "", "calibration inputs, rows are samples (.npy, .npz with --calib-name, .csv, IDX)")
	f.StringVar(&opt.CalibName, "calib-name", opt.CalibName, "name of the array inside an .npz given to --calib or --holdout")
	f.StringVar(&opt.Data, "data", "", "a named data set instead of --calib: fashion-mnist")
	f.IntVar(&opt.CalibSamples, "calib-samples", opt.CalibSamples, "use the first N calibration rows (0 = all); without the flag 40000 for an MLP (10000 with --fast), 4096 for a CNN or a graph")
	f.StringVar(&opt.Holdout, "holdout", "", "held-out inputs on which layer errors are also reported")
	f.StringVar((*string)(&opt.Method), "method", string(opt.Method), "per-layer method: "+methodList())
	f.BoolVar(&opt.Fast, "fast", false, "the cheap path: non-sequential, global allocation, no distillation (flags given still apply)")
	f.BoolVar(&opt.Sequential, "sequential", opt.Sequential, "fit each layer on the compressed network's inputs (Alg 3); default for an MLP or a graph, not a CNN; --sequential=false fits on the original ones")
	f.Float64Var(&opt.Keep, "keep", 0.5, "fraction of parameters (weights and biases) kept, in (0, 1]")
	f.StringVar(&ranks, "ranks", "", "fixed rank per layer, comma-separated (0 keeps a layer dense)")
	f.Float64Var(&opt.Energy, "energy", 0, "per-layer spectral energy to keep, in (0, 1]")
	f.Float64Var(&opt.TargetError, "target-error", 0, "per-layer relative error of the pre-activations to reach")
	f.StringVar((*string)(&opt.Allocation), "allocation", string(opt.Allocation), "how --keep is split over layers: "+allocationList()+" (see above)")
	f.StringVar((*string)(&opt.Bias), "bias", string(opt.Bias), "bias handling of data/convex/relu: center (dense re-fitted), augment (inside the rank) or keep")
	f.StringVar((*string)(&opt.Route), "route", string(opt.Route), "whitening route of Alg 2: auto, qr, gram or projection")
	f.Float64Var(&opt.Ridge, "ridge", 0, "relative ridge added to the whitening Gram matrix (0 = only if singular; reported)")
	f.IntVar(&opt.Distill, "distill", opt.Distill, "epochs of distillation to the original's outputs after the layer fit (MLPs and graphs; 0 = none); without the flag, only when ≤ 25% is kept")
	f.Float64Var(&opt.DistillLR, "distill-lr", compress.DefaultDistillLR, "Adam's learning rate for --distill")
	// Library messages name DistillOptions.Epochs and .LearningRate.
	_ = f.SetAnnotation("distill", optionAnnotation, []string{"Epochs"})
	_ = f.SetAnnotation("distill-lr", optionAnnotation, []string{"LearningRate"})
	f.StringVar(&opt.Out, "out", "", "output model file (.safetensors or .onnx); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	return c
}

// compressInputs are what compress reads: the calibration and held-out
// inputs, the labelled test split (with --data) and every input file, for
// the manifest.
type compressInputs struct {
	calib, holdout *mat.Dense
	test           *dataio.Labeled
	files          []string
}

// compressTarget is compress for one kind of network (an MLP, a CNN, a
// graph): the steps that differ between them, around the one path of
// runCompress.
type compressTarget struct {
	net nn.Network
	// kind names the network in messages ("CNN"); shape, if not empty,
	// describes one sample of its inputs ("1×28×28 images").
	kind, shape string
	// whole reports an MLP, which takes --holdout (per-layer held-out
	// errors) and the distillation the default preset chooses; distills
	// a network --distill fits (an MLP, a graph), whose manifest then
	// reports the distillation.
	whole, distills bool
	// calibDefault, if not 0, replaces --calib-samples when not given.
	calibDefault int
	// run compresses the network; print writes the human report.
	run   func(ctx context.Context, x *mat.Dense, copt compress.Options) (*compressedNetwork, error)
	print func(w io.Writer, out *compressResult, compressTime time.Duration)
}

// compressedNetwork is what a compressTarget's run returns: the evidence,
// the per-module data (nil for an MLP), the compressed network and how to
// write it.
type compressedNetwork struct {
	res     compress.Result
	modules any
	model   nn.Network
	save    func(path string, meta map[string]string, dtype string) error
	// unit names the calibration samples in the metadata ("images").
	unit string
}

// compressTargetFor returns compress for the model's kind, after checking
// the network.
func compressTargetFor(model nn.Network, opt compressOptions) (*compressTarget, error) {
	switch net := model.(type) {
	case *nn.Graph:
		return graphTarget(net, opt)
	case *nn.CNN:
		return cnnTarget(net, opt)
	case *nn.MLP:
		return mlpTarget(net, opt)
	}
	return nil, inputErrorf("--model %s: a %T cannot be compressed", opt.Model, model)
}

// mlpCalibRows is compress's default number of calibration rows for an MLP
// without --fast: on a PyTorch-trained Fashion-MNIST MLP the default recipe
// lost 0.24 points at keep 0.1 from 40 000 rows against 0.68 from 20 000,
// and at keep 0.05 1.97 from 20 000 against 2.57 from 10 000
// (distillation gains most from the rows; docs/compress.md). --fast keeps
// the flag's 10 000.
const mlpCalibRows = 40000

// fastCalibRows is --calib-samples' default: an MLP's with --fast.
const fastCalibRows = 10000

// mlpTarget is compress for an MLP (compress.CompressMLP), written to
// --out as safetensors or ONNX by its extension.
func mlpTarget(net *nn.MLP, opt compressOptions) (*compressTarget, error) {
	if err := compress.CheckNetwork(net); err != nil {
		return nil, inputErrorf("--model %s: %v", opt.Model, err)
	}
	calib := mlpCalibRows
	if opt.Fast {
		calib = 0 // the flag's default
	}
	return &compressTarget{net: net, kind: "MLP", whole: true, distills: true, print: printCompress, calibDefault: calib,
		run: func(ctx context.Context, x *mat.Dense, copt compress.Options) (*compressedNetwork, error) {
			res, err := compress.CompressMLP(ctx, net, x, copt)
			if err != nil {
				return nil, err
			}
			return &compressedNetwork{res: *res, model: res.Model, unit: "rows",
				save: func(p string, meta map[string]string, dtype string) error {
					return saveNetwork(opt.Out, p, res.Model, meta, dtype)
				}}, nil
		}}, nil
}

// compressGCPercent is the collector's GOGC during compress (unless GOGC
// is set): the layer fits and the distillation's forward and backward
// passes allocate short-lived buffers at a high rate, and collecting when
// the heap has grown 4× instead of 1× since the last collection cut the
// default recipe's time on a ViT at keep 0.5 from 68 s to 48 s of wall
// time on 2 cores (peak memory 3.9 → 6.6 GB; docs/compress.md, "Three
// seeds"). The soft memory limit of twice the memory budget
// (limitHeapToBudget) still bounds the heap.
const compressGCPercent = 400

// runCompress is compress: validate the flags, read the network and the
// data, compress, evaluate, write the model and its manifest, print.
func (a *app) runCompress(cmd *cobra.Command, opt compressOptions, ranks string) error {
	start := time.Now()
	if err := opt.validate(cmd, ranks); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(compressGCPercent))
	}
	model, _, err := loadAnyNetwork(opt.Model)
	if err != nil {
		return fmt.Errorf("reading --model: %w", err)
	}
	opt.preset(cmd, model)
	t, err := compressTargetFor(model, opt)
	if err != nil {
		return err
	}
	if !t.whole && opt.Holdout != "" {
		return usageErrorf("--holdout is not available for a %s (per-layer held-out errors are computed for MLPs); --data fashion-mnist reports test accuracy", t.kind)
	}
	if t.calibDefault > 0 && !cmd.Flags().Changed("calib-samples") {
		opt.CalibSamples = t.calibDefault
	}
	in, err := opt.read(a.context(), t)
	if err != nil {
		return err
	}
	man, err := a.newManifest("compress", &opt, 0, in.files...)
	if err != nil {
		return err
	}
	readTime := time.Since(start)

	copt := opt.library(in.holdout)
	plan, estimate := compressPlan(t, copt, in.calib, opt.Fast, cmd.Flags().Changed("calib-samples"))
	a.notef("%s\n", plan)
	progress, clear := a.progress()
	cstart := time.Now()
	copt.Progress = progress
	cn, err := t.run(cmd.Context(), in.calib, copt)
	clear()
	if err != nil {
		return err
	}
	compressTime := time.Since(cstart)
	res := &cn.res
	withFlagTexts(res.Warnings, cmd) // the library's warnings name options; the user reads flags
	out := compressResult{Command: "compress", Result: *res, Modules: cn.modules, Estimate: estimate, Options: opt, Out: opt.Out, Manifest: dataio.ManifestPath(opt.Out)}
	evalStart := time.Now()
	if err := out.evaluate(in.test, opt.Data, t.net, cn.model); err != nil {
		return err
	}
	out.Timings = map[string]float64{
		"read":     readTime.Seconds(),
		"compress": compressTime.Seconds(),
		"evaluate": time.Since(evalStart).Seconds(),
	}
	man.Timings = out.Timings
	results := map[string]any{
		"params": res.Params, "dense_params": res.DenseParams, "budget": res.Budget, "kept": res.Kept,
		"layers": res.Layers, "warnings": res.Warnings, "original": out.Original, "compressed": out.Compressed,
	}
	if cn.modules != nil {
		results["modules"] = cn.modules
	}
	if t.distills {
		results["distill"] = res.Distill
	}
	man.Results = jsonsafe.Finite(results)
	meta := out.metadata(cn.unit)
	if _, err := a.writeAll(man, []outFile{{path: opt.Out, write: func(p string) error {
		w := time.Now()
		if err := cn.save(p, meta, strings.ToUpper(opt.DType)); err != nil {
			return fmt.Errorf("writing the model: %w", err)
		}
		out.Timings["write"] = time.Since(w).Seconds()
		return nil
	}}}); err != nil {
		return err
	}
	out.Seconds = time.Since(start).Seconds()
	return a.emit(out, func(w io.Writer) { t.print(w, &out, compressTime) })
}

// compressPlan is the line compress prints before it starts: what it will
// do and, for an MLP or a graph, the time it will take here
// (compress.EstimateMLP, EstimateGraph; also returned), beside the other preset's (fast: --fast was given;
// calibGiven: --calib-samples was, else the other preset reads its own
// default number of rows, assumed available when this one read all of
// its own).
func compressPlan(t *compressTarget, o compress.Options, x *mat.Dense, fast, calibGiven bool) (string, *compress.Cost) {
	rows, _ := x.Dims()
	alloc := o.Allocation.Resolve(compress.CanProbe(t.net), o.Keep, o.AutoMax())
	fit := "non-sequential"
	if o.Sequential {
		fit = "sequential"
	}
	plan := fmt.Sprintf("compress: %s %s fit on %d rows", fit, o.Method, rows)
	keep := o.Ranks == nil && o.Energy == 0 && o.TargetError == 0
	if keep {
		plan += fmt.Sprintf(", keep %g, %s allocation", o.Keep, alloc)
	}
	switch {
	case o.Distill.Epochs == 0 || !t.distills || o.Distill.Auto && keep && o.Keep > o.AutoMax():
	case o.Distill.Auto && !keep:
		plan += fmt.Sprintf(", %d epochs of distillation if ≤ %g of the parameters are kept", o.Distill.Epochs, o.AutoMax())
	default:
		plan += fmt.Sprintf(", %d epochs of distillation", o.Distill.Epochs)
	}
	var estimate func(rows int, o compress.Options) compress.Cost
	otherRows := rows // a graph reads the same samples with or without --fast
	switch net := t.net.(type) {
	case *nn.MLP:
		speed := compress.MatmulSpeed(net)
		estimate = func(rows int, o compress.Options) compress.Cost { return compress.EstimateMLP(net, rows, o, speed) }
		switch { // the other preset's own default rows, unless --calib-samples was given
		case calibGiven:
		case !fast:
			otherRows = min(rows, fastCalibRows)
		case rows == fastCalibRows:
			otherRows = mlpCalibRows
		}
	case *nn.Graph:
		speed := compress.GraphSpeed(net)
		estimate = func(rows int, o compress.Options) compress.Cost { return compress.EstimateGraph(net, rows, o, speed) }
	default:
		return plan, nil
	}
	other, name := compress.FastOptions(), "--fast"
	if fast {
		other, name = compress.DefaultOptions(t.net), "without --fast"
	}
	other.Keep, other.Ranks, other.Energy, other.TargetError = o.Keep, o.Ranks, o.Energy, o.TargetError
	est := estimate(rows, o)
	return fmt.Sprintf("%s; estimated %s on this machine now (%s: %s)", plan,
		roundDuration(est.Seconds), name, roundDuration(estimate(otherRows, other).Seconds)), &est
}

// roundDuration writes s seconds to two significant digits ("35 s", "2.1 min").
func roundDuration(s float64) string {
	if s >= 90 {
		return fmt.Sprintf("%.2g min", s/60)
	}
	return fmt.Sprintf("%.2g s", math.Max(s, 0.1))
}

// validate checks the flags of compress before anything is read.
func (opt *compressOptions) validate(cmd *cobra.Command, ranks string) error {
	if opt.Model == "" {
		return usageErrorf("--model is required")
	}
	if (opt.Calib == "") == (opt.Data == "") {
		return usageErrorf("give exactly one of --calib X.npy and --data fashion-mnist")
	}
	if opt.Data != "" && opt.Data != datasetFashionMNIST {
		return usageErrorf("--data must be %s (use --calib for a file of inputs), got %q", datasetFashionMNIST, opt.Data)
	}
	if opt.CalibSamples < 0 {
		return usageErrorf("--calib-samples must be ≥ 0 (0 = all), got %d", opt.CalibSamples)
	}
	if err := opt.rankSelection(cmd, ranks); err != nil {
		return err
	}
	if !(opt.DistillLR > 0) { // the library would read 0 as its default
		return usageErrorf("--distill-lr must be positive, got %g", opt.DistillLR)
	}
	if err := opt.checkModes(); err != nil {
		return err
	}
	return checkModelOut(&opt.DType, opt.Out, opt.Model, opt.Calib, opt.Holdout)
}

// preset fills the flags not given from compress.DefaultOptions for the
// model, or with --fast from compress.FastOptions: the library's defaults
// are the CLI's.
func (opt *compressOptions) preset(cmd *cobra.Command, model nn.Network) {
	base := compress.DefaultOptions(model)
	if opt.Fast {
		base = compress.FastOptions()
	}
	fl := cmd.Flags()
	if !fl.Changed("method") {
		opt.Method = base.Method
	}
	if !fl.Changed("sequential") {
		// A method that ignores the compressed inputs is not sequential
		// unless asked (then it warns).
		opt.Sequential = base.Sequential && opt.Method.FitsCompressedInputs()
	}
	if !fl.Changed("allocation") {
		opt.Allocation = base.Allocation
	}
	if !fl.Changed("distill") {
		opt.Distill, opt.DistillAuto = base.Distill.Epochs, base.Distill.Auto
	}
	opt.AutoMaxKeep = base.AutoMaxKeep
}

// rankSelection checks that at most one of --keep, --ranks, --energy and
// --target-error is given, and valid; none means --keep 0.5.
func (opt *compressOptions) rankSelection(cmd *cobra.Command, ranks string) error {
	sel := 0
	if cmd.Flags().Changed("keep") {
		sel++
		if !(opt.Keep > 0 && opt.Keep <= 1) {
			return usageErrorf("--keep is the fraction of parameters kept and must lie in (0, 1], got %g", opt.Keep)
		}
	}
	if ranks != "" {
		sel++
		for _, f := range strings.Split(ranks, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 0 {
				return usageErrorf("--ranks must be comma-separated integers ≥ 0 (0 keeps a layer dense), got %q", ranks)
			}
			opt.Ranks = append(opt.Ranks, v)
		}
	}
	if cmd.Flags().Changed("energy") {
		sel++
		if !(opt.Energy > 0 && opt.Energy <= 1) {
			return usageErrorf("--energy must lie in (0, 1], got %g", opt.Energy)
		}
	}
	if cmd.Flags().Changed("target-error") {
		sel++
		if !(opt.TargetError > 0) {
			return usageErrorf("--target-error must be positive, got %g", opt.TargetError)
		}
	}
	if sel > 1 {
		return usageErrorf("give only one of --keep, --ranks, --energy and --target-error")
	}
	if sel == 0 {
		opt.Keep = 0.5
	}
	return nil
}

// checkModes checks the named modes (method, allocation, bias, route) and
// the ridge through compress.Options.Validate.
func (opt *compressOptions) checkModes() error {
	if err := opt.library(nil).Validate(); err != nil {
		return optionsUsageError(err)
	}
	return nil
}

// library is the compression options the flags stand for.
func (opt *compressOptions) library(holdout *mat.Dense) compress.Options {
	return compress.Options{
		Method: opt.Method, Sequential: opt.Sequential, Keep: opt.Keep, Allocation: opt.Allocation,
		Ranks: opt.Ranks, Energy: opt.Energy, TargetError: opt.TargetError,
		Layer:       compress.LayerOptions{Bias: opt.Bias, Route: opt.Route, Ridge: opt.Ridge},
		Distill:     compress.DistillOptions{Epochs: opt.Distill, Auto: opt.DistillAuto, LearningRate: opt.DistillLR},
		AutoMaxKeep: opt.AutoMaxKeep,
		Holdout:     holdout,
	}
}

// allocationList is compress.Allocations as "global, uniform, …" for --help.
func allocationList() string {
	names := make([]string, len(compress.Allocations))
	for i, a := range compress.Allocations {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// methodList is compress.Methods as "svd, asvd, …" for --help.
func methodList() string {
	names := make([]string, len(compress.Methods))
	for i, m := range compress.Methods {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// read loads the calibration data, and the held-out data when t takes
// them, and checks their widths against the network. Without --holdout the
// test split of --data is the held-out set of an MLP; other networks have
// none.
func (opt *compressOptions) read(ctx context.Context, t *compressTarget) (*compressInputs, error) {
	in := &compressInputs{files: []string{opt.Model}}
	if err := opt.readCalibration(ctx, in); err != nil {
		return nil, err
	}
	if !t.whole {
		in.holdout = nil // the test images: accuracy, not per-layer errors
	}
	if opt.Holdout != "" {
		in.files = append(in.files, opt.Holdout)
		var err error
		if in.holdout, err = readInput(ctx, "--holdout", opt.Holdout, opt.CalibName); err != nil {
			return nil, err
		}
	}
	shape := ""
	if t.shape != "" {
		shape = " (" + t.shape + ")"
	}
	if _, d := in.calib.Dims(); d != t.net.In() {
		return nil, inputErrorf("the calibration data has %d columns but the model takes %d inputs%s", d, t.net.In(), shape)
	}
	if in.holdout != nil {
		if _, d := in.holdout.Dims(); d != t.net.In() {
			return nil, inputErrorf("the held-out data has %d columns but the model takes %d inputs", d, t.net.In())
		}
	}
	return in, nil
}

// readCalibration reads the calibration rows: the first --calib-samples
// training images of --data (whose test split becomes the held-out set), or
// the --calib file.
func (opt *compressOptions) readCalibration(ctx context.Context, in *compressInputs) error {
	if opt.Data != "" {
		train, te, files, err := labeledSplits(opt.Data, "", "")
		if err != nil {
			return err
		}
		in.files = append(in.files, files...)
		in.calib, in.test, in.holdout = train.Head(opt.CalibSamples).X, te, te.X
		return nil
	}
	in.files = append(in.files, opt.Calib)
	// Only the rows used are read: a sample of a big file costs the
	// sample's memory and time.
	calib, err := readInputRows(ctx, "--calib", opt.Calib, opt.CalibName, max(opt.CalibSamples, 0))
	if err != nil {
		return err
	}
	in.calib = calib
	return nil
}

// evaluate scores the original and compressed classifiers on the test
// split, when there is one (--data).
func (out *compressResult) evaluate(test *dataio.Labeled, data string, orig, comp nn.Network) error {
	if test == nil {
		return nil
	}
	if orig.Out() != test.Classes {
		return inputErrorf("the model has %d outputs but %s has %d classes", orig.Out(), data, test.Classes)
	}
	o, err := orig.Evaluate(test.X, test.Labels)
	if err != nil {
		return err
	}
	c, err := comp.Evaluate(test.X, test.Labels)
	if err != nil {
		return err
	}
	out.Original, out.Compressed = &o, &c
	return nil
}

// metadata is the compressed model file's provenance; unit names the
// calibration samples ("rows", "images").
func (out *compressResult) metadata(unit string) map[string]string {
	meta := map[string]string{
		"producer":        "relurec compress",
		"relurec_version": relurecVersion(),
		"source_model":    filepath.Base(out.Options.Model),
		"method":          string(out.Options.Method),
		"sequential":      strconv.FormatBool(out.Options.Sequential),
		"selection":       out.Selection,
		"params":          strconv.Itoa(out.Params),
		"dense_params":    strconv.Itoa(out.DenseParams),
		"calibration":     fmt.Sprintf("%d %s", out.CalibrationRows, unit),
	}
	if out.Compressed != nil {
		meta["test_accuracy"] = strconv.FormatFloat(out.Compressed.Accuracy, 'g', -1, 64)
	}
	return meta
}

// printCompress writes the human report of compress.
func printCompress(w io.Writer, out *compressResult, compressTime time.Duration) {
	r := &out.Result
	seq := "non-sequential (X̌ = X)"
	if r.Sequential {
		seq = "sequential (Alg 3)"
	}
	rows := [][2]string{
		{"method", fmt.Sprintf("%s, %s", r.Method, seq)},
		{"ranks", r.Selection},
	}
	budget := ""
	if r.Budget > 0 {
		budget = fmt.Sprintf(" (budget %d)", r.Budget)
	}
	rows = append(rows,
		[2]string{"parameters", fmt.Sprintf("%d of %d = %.4f kept%s, weights and biases counted", r.Params, r.DenseParams, r.Kept, budget)},
		[2]string{"multiply-adds", fmt.Sprintf("%d of %d per sample", r.MultiplyAdds, r.DenseMultiplyAdds)},
		[2]string{"calibration", fmt.Sprintf("%d rows", r.CalibrationRows)})
	if out.Original != nil && out.Compressed != nil {
		rows = append(rows, [2]string{"test accuracy", fmt.Sprintf("%.4f → %.4f (%+.2f points), loss %.4f → %.4f",
			out.Original.Accuracy, out.Compressed.Accuracy, 100*(out.Compressed.Accuracy-out.Original.Accuracy), out.Original.Loss, out.Compressed.Loss)})
	}
	if d := r.Distill; d != nil {
		kept := fmt.Sprintf("epoch %d kept", d.BestEpoch)
		if d.BestEpoch == 0 {
			kept = "no epoch improved on the layer fit, which is kept"
		}
		rows = append(rows, [2]string{"distillation", fmt.Sprintf("%d epochs, %s: on %d held-out calibration rows agreement %.4f → %.4f, divergence %.4g → %.4g (%.1f s)",
			d.Epochs, kept, d.HoldoutRows, d.StartAgreement, d.Agreement, d.StartDivergence, d.Divergence, d.Seconds)})
	}
	rows = append(rows, [2]string{"time", fmt.Sprintf("%.2f s (compression %.2f s)", out.Seconds, compressTime.Seconds())})
	table(w, rows)
	fmt.Fprintln(w)
	head := "in→out  rank      params (dense)   error calib   held-out   energy"
	if r.Distill != nil {
		head += "   (errors of the layer fit, before distillation)"
	}
	lrows := [][2]string{{"layer", head}}
	for _, l := range r.Layers {
		rank := strconv.Itoa(l.Rank)
		if l.Dense {
			rank = "dense"
			if l.Refit {
				rank = "refit" // dense, refit on the compressed inputs
			}
		}
		ho := "-"
		if l.HeldoutError != nil {
			ho = fmt.Sprintf("%.4f", *l.HeldoutError)
		}
		lrows = append(lrows, [2]string{strconv.Itoa(l.Layer), fmt.Sprintf("%d→%d  %-6s %8d (%7d)   %.4f        %-8s   %.4f",
			l.In, l.Out, rank, l.Params, l.DenseParams, l.Error, ho, l.Energy)})
	}
	table(w, lrows)
	warn := errs.Strings(r.Warnings)
	for _, l := range r.Layers {
		for _, m := range l.Warnings {
			warn = append(warn, fmt.Sprintf("layer %d: %s", l.Layer, m))
		}
	}
	if len(warn) > 0 {
		fmt.Fprintln(w)
		for _, m := range warn {
			fmt.Fprintf(w, "warning: %s\n", m)
		}
	}
	fmt.Fprintf(w, "\nmodel     %s\nmanifest  %s\n", out.Out, out.Manifest)
}
