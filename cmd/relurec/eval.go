package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

// evalResult is what eval prints.
type evalResult struct {
	Command string `json:"command"`
	Model   string `json:"model"`
	Truth   string `json:"truth,omitempty"`
	D       int    `json:"d"`
	K       int    `json:"k"`
	M       int    `json:"m"`
	// Weight errors up to permutation and positive scaling (with --truth).
	Weights *metrics.TwoLayerError `json:"weights,omitempty"`
	// Residual is ‖Y − model(X)‖_F/‖Y‖_F on the data (with data flags).
	Residual *float64 `json:"residual,omitempty"`
	Samples  int      `json:"samples,omitempty"`
	Seconds  float64  `json:"seconds"`
}

const evalLong = `Compare two two-layer ReLU models up to permutation and positive scaling of the
hidden units (rows of V normalised to unit length, U rescaled to match) and
report the largest row error of V, the relative and largest column errors of
U, and the largest relative error of either. With data (--data or --x/--y),
also report the relative residual ‖Y − ReLU(X·Vᵀ)·Uᵀ‖_F / ‖Y‖_F of --model.

With --data fashion-mnist, --model is any MLP classifier (safetensors or
ONNX) and eval reports its accuracy and cross-entropy on the 10 000 test
images, its parameters and multiply-adds per sample, and its forward latency.
There --truth is a reference classifier, such as the model a compressed one
came from: eval adds its accuracy, the fraction of test images on which both
predict the same class, the relative error of the logits, and McNemar's exact
test on the images only one of them classifies correctly (is the accuracy
difference more than test-set noise?).

At least one of --truth and data is required. Nothing is written.`

const evalExample = `  # Weight error of a learned model against the generating teacher
  relurec eval --model model.safetensors --truth teacher.safetensors

  # ... and its residual on held-out data
  relurec eval --model model.safetensors --truth teacher.safetensors --data test.npz

  # Residual only, as JSON
  relurec eval --model model.safetensors --x X.npy --y Y.npy --json

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
		Short:   "Compare a learned two-layer model with the truth and/or measure its residual on data",
		Long:    evalLong,
		Example: evalExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runEval(cmd, modelPath, truthPath, df)
		}),
	}
	f := c.Flags()
	f.StringVar(&modelPath, "model", "", "the model to evaluate (.safetensors or .onnx); required")
	f.StringVar(&truthPath, "truth", "", "the reference model (.safetensors or .onnx), e.g. the teacher from gen --model-out; with --data fashion-mnist any reference classifier")
	df.register(c)
	return c
}

// runEval is eval: it sends a classifier on a named data set to
// evalDataset and a depth-2 model with biases to evalDepth2, and compares a
// bias-free two-layer model with --truth and/or measures its residual on data.
func (a *app) runEval(cmd *cobra.Command, modelPath, truthPath string, df dataFlags) error {
	start := time.Now()
	if modelPath == "" {
		return usageErrorf("--model is required")
	}
	if isNamedDataset(df.data) {
		// A classifier on a named data set (evaldata.go).
		return a.evalDataset(cmd, modelPath, truthPath, df, start)
	}
	if truthPath == "" && !df.given() {
		return usageErrorf("nothing to evaluate against: give --truth MODEL and/or data (--data D.npz or --x/--y)")
	}
	if df.given() {
		if err := df.validate(); err != nil {
			return err
		}
	}
	model, _, err := loadNetwork(modelPath)
	if err != nil {
		return fmt.Errorf("reading --model: %w", err)
	}
	if hasBiases(model) {
		// A depth-2 network with biases (depth2_eval.go).
		return a.evalDepth2(modelPath, truthPath, model, df, start)
	}
	d, k, m, err := twoLayerShape("--model "+modelPath, model)
	if err != nil {
		return err
	}
	res := evalResult{Command: "eval", Model: modelPath, Truth: truthPath, D: d, K: k, M: m}
	if truthPath != "" {
		if res.Weights, err = compareWithTruth(model, truthPath, d, k, m); err != nil {
			return err
		}
	}
	if df.given() {
		x, y, err := df.read(a.context())
		if err != nil {
			return err
		}
		n, xd := x.Dims()
		_, ym := y.Dims()
		if xd != d || ym != m {
			return inputErrorf("the model maps %d inputs to %d outputs but the data has X with %d columns and Y with %d", d, m, xd, ym)
		}
		r := metrics.RelResidual(y, model.Forward(x))
		res.Residual = &r
		res.Samples = n
	}
	res.Seconds = time.Since(start).Seconds()
	return a.emit(res, func(w io.Writer) { table(w, res.rows()) })
}

// compareWithTruth reads the reference model and compares model with it up
// to the symmetries of a two-layer network.
func compareWithTruth(model *nn.MLP, truthPath string, d, k, m int) (*metrics.TwoLayerError, error) {
	truth, _, err := loadNetwork(truthPath)
	if err != nil {
		return nil, fmt.Errorf("reading --truth: %w", err)
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

// rows is eval's human table.
func (res *evalResult) rows() [][2]string {
	rows := [][2]string{{"model", fmt.Sprintf("%s (d=%d, k=%d, m=%d)", res.Model, res.D, res.K, res.M)}}
	if e := res.Weights; e != nil {
		rows = append(rows,
			[2]string{"truth", res.Truth},
			[2]string{"max row error of V", fmt.Sprintf("%.3g", e.MaxRowErrV)},
			[2]string{"relative error of U", fmt.Sprintf("%.3g", e.RelErrU)},
			[2]string{"max column error of U", fmt.Sprintf("%.3g", e.MaxColErrU)},
			[2]string{"max relative error", fmt.Sprintf("%.3g", e.MaxRelErr)},
			[2]string{"unit matching", fmt.Sprintf("%v (truth unit i ↔ model unit perm[i])", e.Perm)})
	}
	if res.Residual != nil {
		rows = append(rows, [2]string{"relative residual", fmt.Sprintf("%.3g on %d samples", *res.Residual, res.Samples)})
	}
	return append(rows, [2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
}
