package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

// hasBiases reports whether a model file's network carries any bias.
func hasBiases(m *nn.MLP) bool {
	if m == nil {
		return false
	}
	for _, l := range m.Layers {
		if l.Bias != nil {
			return true
		}
	}
	return false
}

// depth2EvalResult is what eval prints for depth-2 models with biases.
type depth2EvalResult struct {
	Command string `json:"command"`
	Model   string `json:"model"`
	Truth   string `json:"truth,omitempty"`
	// TruthKind is "model" (parameters and L2 distance below) or "data"
	// (TruthOutputs) with --truth.
	TruthKind string `json:"truth_kind,omitempty"`
	D         int    `json:"d"`
	Hidden    int    `json:"hidden"`
	Outputs   int    `json:"outputs"`
	// Weights compares parameters up to permutation and positive scaling;
	// WeightsSignFlip also allows the joint flip (w, b) → (−w, −b) of the
	// overcomplete case.
	Weights         *metrics.Depth2Error `json:"weights,omitempty"`
	WeightsSignFlip *metrics.Depth2Error `json:"weights_sign_flip,omitempty"`
	// L2 is E‖model(x) − truth(x)‖² under x ~ N(0, I) (closed form) and
	// RelL2 its square root relative to √E‖truth(x)‖².
	L2    *float64 `json:"l2,omitempty"`
	RelL2 *float64 `json:"rel_l2,omitempty"`
	// TruthOutputs compares the model's outputs with a --truth data file.
	TruthOutputs *truthOutputs `json:"truth_outputs,omitempty"`
	Residual     *float64      `json:"residual,omitempty"`
	Samples      int           `json:"samples,omitempty"`
	Seconds      float64       `json:"seconds"`
}

// evalDepth2 is eval for models with biases (learn depth2, gen depth2):
// compared with the reference model truthPath (if any) or with a --truth
// data file (tout), and its residual on x, y (if not nil).
func (a *app) evalDepth2(modelPath, truthPath string, tout *truthOutputs, model *nn.MLP, x, y *mat.Dense, start time.Time) error {
	net, err := nn.Depth2FromMLP(model)
	if err != nil {
		return inputErrorf("--model %s: %v", modelPath, err)
	}
	res := depth2EvalResult{Command: "eval", Model: modelPath, Truth: truthPath, D: net.In(), Hidden: net.Hidden(), Outputs: net.Out(), TruthOutputs: tout}
	if truthPath != "" {
		res.TruthKind = truthKindModel
		if err := res.compareTruth(truthPath, model, net); err != nil {
			return err
		}
	}
	if tout != nil {
		res.Truth, res.TruthKind = tout.File, truthKindData
	}
	if x != nil {
		if err := res.residual(x, y, model, net); err != nil {
			return err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return a.emit(res, func(w io.Writer) { table(w, res.rows()) })
}

// compareTruth fills the parameter errors and the L2 distance of the model
// to the network in truthPath.
func (res *depth2EvalResult) compareTruth(truthPath string, model *nn.MLP, net *nn.Depth2) error {
	truth, err := loadTruthModel(truthPath)
	if err != nil {
		return err
	}
	tn, err := nn.Depth2FromMLP(truth)
	if err != nil {
		return inputErrorf("--truth %s: %v", truthPath, err)
	}
	if tn.In() != net.In() || tn.Out() != net.Out() {
		return inputErrorf("--model maps %d inputs to %d outputs but --truth maps %d to %d; they must match", net.In(), net.Out(), tn.In(), tn.Out())
	}
	e, err := metrics.CompareDepth2(truth, model, false)
	if err != nil {
		return depth2MetricError(err)
	}
	ef, err := metrics.CompareDepth2(truth, model, true)
	if err != nil {
		return depth2MetricError(err)
	}
	l2, err := metrics.L2Depth2(model, truth)
	if err != nil {
		return depth2MetricError(err)
	}
	norm, err := metrics.MeanSquareDepth2(truth)
	if err != nil {
		return depth2MetricError(err)
	}
	rel := math.Sqrt(l2 / norm)
	res.Weights, res.WeightsSignFlip, res.L2, res.RelL2 = &e, &ef, &l2, &rel
	return nil
}

// depth2MetricError reports a metrics error about the networks' shapes or
// values as bad input.
func depth2MetricError(err error) error {
	for _, s := range []error{metrics.ErrShape, metrics.ErrNotFinite, metrics.ErrZeroRow, metrics.ErrNotDepth2} {
		if errors.Is(err, s) {
			return inputErrorf("%v", err)
		}
	}
	return err
}

// residual fills the model's relative residual on the data x, y.
func (res *depth2EvalResult) residual(x, y *mat.Dense, model *nn.MLP, net *nn.Depth2) error {
	n, xd := x.Dims()
	_, yp := y.Dims()
	if xd != net.In() || yp != net.Out() {
		return inputErrorf("the model maps %d inputs to %d outputs but the data has X with %d columns and Y with %d", net.In(), net.Out(), xd, yp)
	}
	r := metrics.RelResidual(y, model.Forward(x))
	res.Residual, res.Samples = &r, n
	return nil
}

// rows is eval's human table for a depth-2 model.
func (res *depth2EvalResult) rows() [][2]string {
	rows := [][2]string{{"model", fmt.Sprintf("%s (d=%d, %d hidden units with biases, %d outputs)", res.Model, res.D, res.Hidden, res.Outputs)}}
	if res.Weights != nil {
		e, ef := res.Weights, res.WeightsSignFlip
		match := fmt.Sprintf("%v (truth unit i ↔ model unit perm[i])", e.Perm)
		if e.Missing > 0 || e.Extra > 0 {
			match += fmt.Sprintf("; %d truth units unmatched, %d model units extra", e.Missing, e.Extra)
		}
		rows = append(rows,
			[2]string{"truth", res.Truth + ": model (parameters compared up to permutation and positive scaling)"},
			[2]string{"max parameter error", fmt.Sprintf("%.3g (w %.3g, b %.3g, a %.3g, output bias %.3g)", e.MaxErr, e.MaxErrW, e.MaxErrB, e.MaxErrA, e.MaxErrC)},
			[2]string{"  … up to sign flips", fmt.Sprintf("%.3g", ef.MaxErr)},
			[2]string{"unit matching", match},
			[2]string{"L2 distance", fmt.Sprintf("E‖f − g‖² = %.3g (relative √: %.3g)", *res.L2, *res.RelL2)})
	}
	rows = append(rows, truthOutputRows(res.TruthOutputs)...)
	if res.Residual != nil {
		rows = append(rows, [2]string{"relative residual", fmt.Sprintf("%.3g on %d samples", *res.Residual, res.Samples)})
	}
	return append(rows, [2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
}
