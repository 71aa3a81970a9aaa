package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

// evalDataResult is what eval prints for a classifier on a named data set
// or on the user's labelled data.
type evalDataResult struct {
	Command      string `json:"command"`
	Model        string `json:"model"`
	Data         string `json:"data"`
	Labels       string `json:"labels,omitempty"` // the labels' array or file, for the user's data
	Architecture []int  `json:"architecture"`
	// Layers describes a CNN's modules (nn.CNN.String); empty for an MLP.
	Layers       string `json:"layers,omitempty"`
	Ranks        []int  `json:"ranks"` // per original layer: inner rank of a factored layer, 0 if dense
	Parameters   int    `json:"parameters"`
	MultiplyAdds int    `json:"multiply_adds"`
	// Test holds accuracy (argmax of the outputs against the labels),
	// mean cross-entropy, correct and samples.
	Test nn.Metrics `json:"test"`
	// Latency: median wall time of a forward pass over the whole test set
	// (batched, all cores) and of a single sample, over repeated runs.
	BatchSeconds     float64 `json:"batch_seconds"`
	MicrosPerSample  float64 `json:"micros_per_sample"`
	SingleMicros     float64 `json:"single_sample_micros"`
	LatencyRepeats   int     `json:"latency_repeats"`
	Seconds          float64 `json:"seconds"`
	LatencyBatchSize int     `json:"latency_batch_size"`
	// TruthKind is "model" or "data" with --truth.
	TruthKind string `json:"truth_kind,omitempty"`
	// With a --truth model: the reference classifier (e.g. the model a
	// compressed one came from), its test metrics, and how faithful --model
	// is to it.
	Reference     string            `json:"reference,omitempty"`
	ReferenceTest *nn.Metrics       `json:"reference_test,omitempty"`
	Fidelity      *metrics.Fidelity `json:"fidelity,omitempty"`
	// With a --truth data file: the model's outputs against its Y.
	TruthOutputs *truthOutputs `json:"truth_outputs,omitempty"`
}

// evalDataset evaluates a classifier on a named data set's test split.
func (a *app) evalDataset(cmd *cobra.Command, modelPath string, model nn.Network, refPath string, tout *truthOutputs, df dataFlags, start time.Time) error {
	_, test, _, err := labeledSplits(df.data, "test-only", "")
	if err != nil {
		return err
	}
	_, d := test.X.Dims()
	if model.In() != d || model.Out() != test.Classes {
		return inputErrorf("--model maps %d inputs to %d outputs but %s has %d inputs and %d classes", model.In(), model.Out(), df.data, d, test.Classes)
	}
	res := evalDataResult{Data: df.data}
	return a.evalClassifier(cmd, &res, modelPath, model, test, df.data+" test split", refPath, tout, start)
}

// evalLabeled evaluates a classifier on the user's data: inputs and integer
// labels (already checked against the model's outputs by readEvalData).
func (a *app) evalLabeled(cmd *cobra.Command, modelPath string, model nn.Network, test *dataio.Labeled, labelName, refPath string, tout *truthOutputs, df dataFlags, start time.Time) error {
	res := evalDataResult{Data: df.data, Labels: labelName}
	desc := fmt.Sprintf("%s (X and labels %s)", df.data, labelName)
	if df.data == "" {
		res.Data = df.x
		desc = fmt.Sprintf("X %s, labels %s", df.x, df.y)
	}
	return a.evalClassifier(cmd, &res, modelPath, model, test, desc, refPath, tout, start)
}

// evalClassifier scores a classifier on labelled data (desc names it in the
// table): accuracy, loss, size, latency, and the comparison with --truth.
func (a *app) evalClassifier(cmd *cobra.Command, res *evalDataResult, modelPath string, model nn.Network, test *dataio.Labeled, desc, refPath string, tout *truthOutputs, start time.Time) error {
	met, err := model.Evaluate(test.X, test.Labels)
	if err != nil {
		return err
	}
	res.Command, res.Model, res.Ranks, res.Test = "eval", modelPath, model.Ranks(), met
	res.Parameters, res.MultiplyAdds = model.NumParams(), model.MultiplyAdds()
	if refPath != "" {
		res.TruthKind = truthKindModel
		if err := res.compareWithReference(model, refPath, test); err != nil {
			return err
		}
	}
	if tout != nil {
		res.TruthKind, res.TruthOutputs = truthKindData, tout
	}
	res.Architecture = architecture(model)
	if c, ok := model.(interface{ String() string }); ok {
		res.Layers = c.String() // a CNN's or a graph's modules
	}
	if err := res.measureLatency(cmd.Context(), model, test.X); err != nil {
		return err
	}
	res.Seconds = time.Since(start).Seconds()
	return a.emit(res, func(w io.Writer) { table(w, res.rows(desc)) })
}

// rows is the human table of a classifier's evaluation on the data desc.
func (res *evalDataResult) rows(desc string) [][2]string {
	met, n := res.Test, res.LatencyBatchSize
	rows := [][2]string{
		{"model", fmt.Sprintf("%s (%s, %d layers)", res.Model, archString(res.Architecture), len(res.Architecture)-1)},
		{"data", fmt.Sprintf("%s, %d samples", desc, met.Samples)},
	}
	if res.Layers != "" {
		rows = append(rows, [2]string{"layers", res.Layers})
	}
	rows = append(rows, [][2]string{
		{"accuracy", fmt.Sprintf("%.4f (%d of %d correct: argmax of the outputs = label)", met.Accuracy, met.Correct, met.Samples)},
		{"loss", fmt.Sprintf("%.4f (mean cross-entropy)", met.Loss)},
		{"parameters", strconv.Itoa(res.Parameters)},
		{"multiply-adds", fmt.Sprintf("%d per sample", res.MultiplyAdds)},
		{"latency", fmt.Sprintf("%.1f ms per batch of %d (%.2f µs/sample), %.1f µs for one sample (medians)", 1e3*res.BatchSeconds, n, res.MicrosPerSample, res.SingleMicros)},
	}...)
	if f := res.Fidelity; f != nil {
		r := res.ReferenceTest
		rows = append(rows,
			[2]string{"reference", fmt.Sprintf("%s: model; accuracy %.4f, loss %.4f, %+.2f points for --model", res.Reference, r.Accuracy, r.Loss, 100*(met.Accuracy-r.Accuracy))},
			[2]string{"agreement", fmt.Sprintf("%.4f (%d of %d samples get the reference's class)", f.Agreement, int(math.Round(f.Agreement*float64(n))), n)},
			[2]string{"logit error", fmt.Sprintf("%.4f (‖Z − Z_ref‖_F / ‖Z_ref‖_F)", f.LogitError)},
			[2]string{"paired test", fmt.Sprintf("only --model right on %d samples, only the reference on %d: McNemar exact p = %.3g", f.OnlyModel, f.OnlyRef, f.McNemarP)})
	}
	rows = append(rows, truthOutputRows(res.TruthOutputs)...)
	return append(rows, [2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
}

// compareWithReference scores a reference classifier on the same test
// images: its accuracy, the agreement and logit error of the model with it,
// and the paired accuracy comparison.
func (res *evalDataResult) compareWithReference(model nn.Network, truthPath string, test *dataio.Labeled) error {
	ref, err := loadTruthNetwork(truthPath)
	if err != nil {
		return err
	}
	if ref.In() != model.In() || ref.Out() != model.Out() {
		return inputErrorf("--truth maps %d inputs to %d outputs but --model maps %d to %d; they must match", ref.In(), ref.Out(), model.In(), model.Out())
	}
	refMet, err := ref.Evaluate(test.X, test.Labels)
	if err != nil {
		return err
	}
	fid, err := metrics.CompareLogits(model.Forward(test.X), ref.Forward(test.X), test.Labels)
	if err != nil {
		return err
	}
	res.Reference, res.ReferenceTest, res.Fidelity = truthPath, &refMet, &fid
	return nil
}

// measureLatency times the forward pass: medians over repeats of the whole
// test batch and of one sample, after one warm-up.
func (res *evalDataResult) measureLatency(ctx context.Context, model nn.Network, X *mat.Dense) error {
	const repeats = 5
	n, d := X.Dims()
	model.Forward(X)
	var batch []float64
	for i := 0; i < repeats; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		model.Forward(X)
		batch = append(batch, time.Since(t).Seconds())
	}
	one := X.Slice(0, 1, 0, d).(*mat.Dense)
	var single []float64
	for i := 0; i < 200; i++ {
		t := time.Now()
		model.Forward(one)
		single = append(single, time.Since(t).Seconds())
	}
	res.BatchSeconds = median(batch)
	res.MicrosPerSample = 1e6 * res.BatchSeconds / float64(n)
	res.SingleMicros = 1e6 * median(single)
	res.LatencyRepeats = repeats
	res.LatencyBatchSize = n
	return nil
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return 0.5 * (s[len(s)/2-1] + s[len(s)/2])
}
