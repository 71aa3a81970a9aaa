package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

// Kinds of --truth, as eval reports them.
const (
	truthKindModel = "model" // a reference network: weights compared
	truthKindData  = "data"  // an .npz of inputs X and true outputs Y
)

// truthHint says what --truth takes, for error messages.
const truthHint = `--truth takes a model (.safetensors or .onnx) or an .npz holding arrays X (n×d inputs) and Y (n×m true outputs), as numpy.savez("truth.npz", X=X, Y=Y) writes them`

// evalResult is what eval prints.
type evalResult struct {
	Command string `json:"command"`
	Model   string `json:"model"`
	// Architecture is set (and K is 0) for a model that is not a bias-free
	// two-layer network: the widths of its layers, inputs first.
	Architecture []int  `json:"architecture,omitempty"`
	Truth        string `json:"truth,omitempty"`
	TruthKind    string `json:"truth_kind,omitempty"` // "model" or "data"
	D            int    `json:"d"`
	K            int    `json:"k"`
	M            int    `json:"m"`
	// Weight errors up to permutation and positive scaling (with a --truth model).
	Weights *metrics.TwoLayerError `json:"weights,omitempty"`
	// TruthOutputs compares the model's outputs with a --truth data file.
	TruthOutputs *truthOutputs `json:"truth_outputs,omitempty"`
	// Residual is ‖Y − model(X)‖_F/‖Y‖_F on the data (with data flags).
	Residual *float64 `json:"residual,omitempty"`
	Samples  int      `json:"samples,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// truthOutputs compares a model's outputs on the inputs X of a --truth data
// file with the true outputs Y held there.
type truthOutputs struct {
	File    string `json:"file"`
	Samples int    `json:"samples"`
	// RelError is ‖model(X) − Y‖_F / ‖Y‖_F, MaxAbsError max |model(X) − Y|.
	RelError    float64 `json:"rel_error"`
	MaxAbsError float64 `json:"max_abs_error"`
}

const evalLong = `Compare two two-layer ReLU models up to permutation and positive scaling of the
hidden units (rows of V normalised to unit length, U rescaled to match) and
report the largest row error of V, the relative and largest column errors of
U, and the largest relative error of either. With data (--data or --x/--y),
also report the relative residual ‖Y − ReLU(X·Vᵀ)·Uᵀ‖_F / ‖Y‖_F of --model.

--truth is either a reference model (.safetensors or .onnx) or an .npz data
file holding inputs X and the true outputs Y (--x-name/--y-name rename them):
then eval runs --model on X and reports the relative output error
‖model(X) − Y‖_F / ‖Y‖_F and the largest absolute error, for any MLP. The
output says which kind of truth was used (JSON: truth_kind "model" or "data").

A classifier on your own data: when the data's targets are one column of
integer class labels and --model has two or more outputs, eval reports the
accuracy (argmax of the outputs against the labels), the cross-entropy and the
number of samples. In an .npz the labels are Y, or y or labels when there is
no Y (train mlp's convention: X and y); labels must lie in [0, outputs).

With --data fashion-mnist, --model is any MLP classifier (safetensors or
ONNX) and eval reports its accuracy and cross-entropy on the 10 000 test
images, its parameters and multiply-adds per sample, and its forward latency.
There (and with your own labelled data) a --truth model is a reference
classifier, such as the model a compressed one came from: eval adds its
accuracy, the fraction of samples on which both predict the same class, the
relative error of the logits, and McNemar's exact test on the samples only one
of them classifies correctly (is the accuracy difference more than noise?).

At least one of --truth and data is required. Nothing is written.`

const evalExample = `  # Weight error of a learned model against the generating teacher
  relurec eval --model model.safetensors --truth teacher.safetensors

  # ... and its residual on held-out data
  relurec eval --model model.safetensors --truth teacher.safetensors --data test.npz

  # Residual only, as JSON
  relurec eval --model model.safetensors --x X.npy --y Y.npy --json

  # Truth as data: compare any model's outputs with saved true outputs
  # (python: numpy.savez("truth.npz", X=X, Y=torch_model(X)))
  relurec eval --model model.onnx --truth truth.npz

  # Accuracy of a classifier on your own labelled data: an .npz with X and
  # integer labels y (python: numpy.savez("test.npz", X=X, y=y))
  relurec eval --model mlp.safetensors --data test.npz

  # A classifier (any MLP, e.g. from train mlp or compress) on Fashion-MNIST's
  # test set: accuracy, loss, parameters, multiply-adds, forward latency
  relurec eval --model small.safetensors --data fashion-mnist

  # ... and how faithful it is to the model it was compressed from
  relurec eval --model small.safetensors --truth mlp.safetensors --data fashion-mnist`

func newEvalCmd(a *app) *cobra.Command {
	var modelPath, truthPath string
	var df dataFlags
	c := &cobra.Command{
		Use:     "eval",
		Short:   "Compare a model with the truth (a model or true outputs) and/or measure its residual or accuracy on data",
		Long:    evalLong,
		Example: evalExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runEval(cmd, modelPath, truthPath, df)
		}),
	}
	f := c.Flags()
	f.StringVar(&modelPath, "model", "", "the model to evaluate (.safetensors or .onnx); required")
	f.StringVar(&truthPath, "truth", "", "the reference model (.safetensors or .onnx), e.g. the teacher from gen --model-out; or an .npz with inputs X and true outputs Y")
	df.register(c)
	return c
}

// runEval is eval: it checks the model against a --truth data file (any
// model), sends a classifier to evalClassifier (a named data set, or data
// whose targets are labels), a depth-2 model with biases to evalDepth2, and
// compares a bias-free two-layer model with a --truth model and/or measures
// its residual on data.
func (a *app) runEval(cmd *cobra.Command, modelPath, truthPath string, df dataFlags) error {
	start := time.Now()
	if modelPath == "" {
		return usageErrorf("--model is required")
	}
	named := isNamedDataset(df.data)
	if named && (df.x != "" || df.y != "") {
		return usageErrorf("give either --data %s or --x/--y, not both", df.data)
	}
	if truthPath == "" && !df.given() {
		return usageErrorf("nothing to evaluate against: give --truth MODEL (or --truth TRUTH.npz with X and Y) and/or data (--data D.npz or --x/--y)")
	}
	if df.given() && !named {
		if err := df.validate(); err != nil {
			return err
		}
	}
	truthData, err := truthIsData(truthPath)
	if err != nil {
		return err
	}
	model, _, err := loadAnyNetwork(modelPath)
	if err != nil {
		return fmt.Errorf("reading --model: %w", err)
	}
	mlp, isMLP := model.(*nn.MLP) // a CNN is scored on data only
	var tout *truthOutputs
	refPath := truthPath // the reference model, if --truth is one
	if truthData {
		refPath = ""
		if tout, err = compareWithTruthData(a, model, truthPath, df); err != nil {
			return err
		}
	}
	if named {
		// A classifier on a named data set (evaldata.go).
		return a.evalDataset(cmd, modelPath, model, refPath, tout, df, start)
	}
	var x, y *mat.Dense
	if df.given() {
		var labeled *dataio.Labeled
		var labelName string
		if x, y, labeled, labelName, err = a.readEvalData(cmd, df, model); err != nil {
			return err
		}
		if labeled != nil {
			// A classifier on the user's labelled data (evaldata.go).
			return a.evalLabeled(cmd, modelPath, model, labeled, labelName, refPath, tout, df, start)
		}
	}
	if isMLP && hasBiases(mlp) && (refPath != "" || isDepth2(mlp)) {
		// A depth-2 network with biases (depth2_eval.go).
		return a.evalDepth2(modelPath, refPath, tout, mlp, x, y, start)
	}
	return a.evalTwoLayer(modelPath, refPath, tout, model, x, y, start)
}

// evalTwoLayer compares a bias-free two-layer model with the reference
// model refPath (if any) and measures its residual on x, y (if not nil).
// Without a reference model any MLP or CNN is accepted: only its outputs are
// measured.
func (a *app) evalTwoLayer(modelPath, refPath string, tout *truthOutputs, model nn.Network, x, y *mat.Dense, start time.Time) error {
	mlp, isMLP := model.(*nn.MLP)
	if !isMLP && refPath != "" {
		return inputErrorf("--model %s is a convolutional network and --truth %s a model: eval compares the weights of two-layer MLPs only; score the CNN on data (--data fashion-mnist, or labelled data) — with such data a --truth model is the reference classifier — or against a --truth .npz of inputs X and outputs Y", modelPath, refPath)
	}
	d, k, m, err := 0, 0, 0, errNotMLP
	if isMLP {
		d, k, m, err = twoLayerShape("--model "+modelPath, mlp)
	}
	res := evalResult{Command: "eval", Model: modelPath, D: d, K: k, M: m, TruthOutputs: tout}
	if err != nil {
		if refPath != "" {
			return err
		}
		res.D, res.K, res.M, res.Architecture = model.In(), 0, model.Out(), architecture(model)
	}
	if refPath != "" {
		res.Truth, res.TruthKind = refPath, truthKindModel
		if res.Weights, err = compareWithTruth(mlp, refPath, d, k, m); err != nil {
			return err
		}
	}
	if tout != nil {
		res.Truth, res.TruthKind = tout.File, truthKindData
	}
	if x != nil {
		n, xd := x.Dims()
		_, ym := y.Dims()
		if xd != res.D || ym != res.M {
			return inputErrorf("the model maps %d inputs to %d outputs but the data has X with %d columns and Y with %d", res.D, res.M, xd, ym)
		}
		r := metrics.RelResidual(y, model.Forward(x))
		res.Residual = &r
		res.Samples = n
	}
	res.Seconds = time.Since(start).Seconds()
	return a.emit(res, func(w io.Writer) { table(w, res.rows()) })
}

// isDepth2 reports whether m is Linear → ReLU → Linear (biases allowed).
func isDepth2(m *nn.MLP) bool {
	_, err := nn.Depth2FromMLP(m)
	return err == nil
}

// errNotMLP stands for twoLayerShape's error when the model is a CNN.
var errNotMLP = errs.New("a convolutional network", errs.ErrInput)

// architecture lists the widths of a network's layers, inputs first: for a
// CNN, the input channels and the output channels or width of every Conv2d
// and Linear (nn.CNN.Widths); for a graph, its input size and the output
// width of every MatMul and Gemm weight.
func architecture(n nn.Network) []int {
	if g, ok := n.(*nn.Graph); ok {
		return append([]int{g.In()}, g.Ranks()...)
	}
	m, ok := n.(*nn.MLP)
	if !ok {
		return n.(*nn.CNN).Widths()
	}
	a := []int{m.In()}
	for _, l := range m.Layers {
		a = append(a, l.Out())
	}
	return a
}

// archString is an architecture as 784-128-10.
func archString(arch []int) string {
	s := make([]string, len(arch))
	for i, w := range arch {
		s[i] = strconv.Itoa(w)
	}
	return strings.Join(s, "-")
}

// truthIsData reports whether --truth names a data file (an .npz of X and
// Y) rather than a model; a lone array (.npy, .csv) is refused, since it
// cannot hold both.
func truthIsData(path string) (bool, error) {
	if path == "" {
		return false, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npz":
		return true, nil
	case ".npy", ".csv":
		return false, usageErrorf("--truth %s holds a single array, which cannot hold both inputs and outputs; %s", path, truthHint)
	}
	return false, nil
}

// loadTruthNetwork reads a --truth model that may be an MLP or a CNN (the
// reference classifier), saying what --truth takes when the file is not
// one.
func loadTruthNetwork(path string) (nn.Network, error) {
	m, _, err := loadAnyNetwork(path)
	if err != nil {
		return nil, fmt.Errorf("reading --truth: %w\n%s", err, truthHint)
	}
	return m, nil
}

// loadTruthModel reads a --truth model, saying what --truth takes when the
// file is not one.
func loadTruthModel(path string) (*nn.MLP, error) {
	m, _, err := loadNetwork(path)
	if err != nil {
		return nil, fmt.Errorf("reading --truth: %w\n%s", err, truthHint)
	}
	return m, nil
}

// compareWithTruthData runs model on the inputs X of the --truth data file
// (read like --data, with --x-name/--y-name) and compares its outputs with
// the true outputs Y there.
func compareWithTruthData(a *app, model nn.Network, path string, df dataFlags) (*truthOutputs, error) {
	x, y, err := (&dataFlags{data: path, xName: df.xName, yName: df.yName}).read(a.context())
	if err != nil {
		return nil, fmt.Errorf("--truth %s: %w\n%s", path, err, truthHint)
	}
	n, xd := x.Dims()
	_, ym := y.Dims()
	if xd != model.In() || ym != model.Out() {
		return nil, inputErrorf("--model maps %d inputs to %d outputs but --truth %s has X with %d columns and Y with %d; they must match", model.In(), model.Out(), path, xd, ym)
	}
	f := model.Forward(x)
	maxAbs := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j < ym; j++ {
			maxAbs = math.Max(maxAbs, math.Abs(f.At(i, j)-y.At(i, j)))
		}
	}
	return &truthOutputs{File: path, Samples: n, RelError: metrics.RelResidual(y, f), MaxAbsError: maxAbs}, nil
}

// readEvalData reads eval's data and tells regression targets from class
// labels: targets that are one column while the model has two or more
// outputs are labels (integers in [0, outputs)), returned as labeled with
// the name they were read under. Without --y-name, an .npz lacking Y offers
// its y or labels array (train mlp's convention is X and y).
func (a *app) readEvalData(cmd *cobra.Command, df dataFlags, model nn.Network) (x, y *mat.Dense, labeled *dataio.Labeled, yName string, err error) {
	if df.data != "" && !cmd.Flags().Changed("y-name") && strings.EqualFold(filepath.Ext(df.data), ".npz") {
		if names, err := dataio.NPZNames(df.data); err == nil && !slices.Contains(names, df.yName) {
			for _, alt := range []string{"y", "labels"} {
				if slices.Contains(names, alt) {
					df.yName = alt
					break
				}
			}
		}
	}
	if x, y, err = df.read(a.context()); err != nil {
		return nil, nil, nil, "", err
	}
	yName = df.yName
	if df.data == "" {
		yName = df.y
	}
	if _, c := y.Dims(); c != 1 || model.Out() < 2 {
		return x, y, nil, yName, nil
	}
	if _, d := x.Dims(); d != model.In() {
		return nil, nil, nil, "", inputErrorf("--model takes %d inputs but X has %d columns", model.In(), d)
	}
	l, err := toLabeled(x, y, yName)
	if err != nil {
		return nil, nil, nil, "", inputErrorf("%v (%s is one column while --model has %d outputs, so eval reads it as class labels; regression targets would be n×%d)", err, yName, model.Out(), model.Out())
	}
	for i, c := range l.Labels {
		if c >= model.Out() {
			return nil, nil, nil, "", inputErrorf("label %d at row %d of %s is outside [0, %d): --model has %d outputs, one per class, so labels must be 0 … %d", c, i, yName, model.Out(), model.Out(), model.Out()-1)
		}
	}
	l.Classes = model.Out()
	return x, y, l, yName, nil
}

// compareWithTruth reads the reference model and compares model with it up
// to the symmetries of a two-layer network.
func compareWithTruth(model *nn.MLP, truthPath string, d, k, m int) (*metrics.TwoLayerError, error) {
	truth, err := loadTruthModel(truthPath)
	if err != nil {
		return nil, err
	}
	td, tk, tm, err := twoLayerShape("--truth "+truthPath, truth)
	if err != nil {
		return nil, err
	}
	if td != d || tk != k || tm != m {
		return nil, inputErrorf("--model is d=%d, k=%d, m=%d but --truth is d=%d, k=%d, m=%d; they must match", d, k, m, td, tk, tm)
	}
	e, err := metrics.CompareTwoLayer(truth, model)
	if err != nil {
		for _, s := range []error{metrics.ErrShape, metrics.ErrNotFinite, metrics.ErrZeroRow, metrics.ErrNotTwoLayer} {
			if errors.Is(err, s) {
				// A property of the user's model files.
				return nil, inputErrorf("%v", err)
			}
		}
		return nil, err
	}
	return &e, nil
}

// truthOutputRows is the human table of a comparison with a --truth data
// file.
func truthOutputRows(t *truthOutputs) [][2]string {
	if t == nil {
		return nil
	}
	return [][2]string{
		{"truth", fmt.Sprintf("%s: data (true outputs Y for inputs X), %d samples", t.File, t.Samples)},
		{"relative output error", fmt.Sprintf("%.3g (‖model(X) − Y‖_F / ‖Y‖_F)", t.RelError)},
		{"max abs output error", fmt.Sprintf("%.3g", t.MaxAbsError)},
	}
}

// rows is eval's human table.
func (res *evalResult) rows() [][2]string {
	rows := [][2]string{{"model", fmt.Sprintf("%s (d=%d, k=%d, m=%d)", res.Model, res.D, res.K, res.M)}}
	if res.Architecture != nil {
		rows[0][1] = fmt.Sprintf("%s (%s, %d layers)", res.Model, archString(res.Architecture), len(res.Architecture)-1)
	}
	if e := res.Weights; e != nil {
		rows = append(rows,
			[2]string{"truth", res.Truth + ": model (weights compared up to permutation and positive scaling)"},
			[2]string{"max row error of V", fmt.Sprintf("%.3g", e.MaxRowErrV)},
			[2]string{"relative error of U", fmt.Sprintf("%.3g", e.RelErrU)},
			[2]string{"max column error of U", fmt.Sprintf("%.3g", e.MaxColErrU)},
			[2]string{"max relative error", fmt.Sprintf("%.3g", e.MaxRelErr)},
			[2]string{"unit matching", fmt.Sprintf("%v (truth unit i ↔ model unit perm[i])", e.Perm)})
	}
	rows = append(rows, truthOutputRows(res.TruthOutputs)...)
	if res.Residual != nil {
		rows = append(rows, [2]string{"relative residual", fmt.Sprintf("%.3g on %d samples", *res.Residual, res.Samples)})
	}
	return append(rows, [2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
}
