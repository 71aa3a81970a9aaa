package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// evalDataResult is what eval prints for a classifier on a named data set.
type evalDataResult struct {
	Command      string     `json:"command"`
	Model        string     `json:"model"`
	Data         string     `json:"data"`
	Architecture []int      `json:"architecture"`
	Ranks        []int      `json:"ranks"` // per original layer: inner rank of a factored layer, 0 if dense
	Parameters   int        `json:"parameters"`
	MultiplyAdds int        `json:"multiply_adds"`
	Test         nn.Metrics `json:"test"`
	// Latency: median wall time of a forward pass over the whole test set
	// (batched, all cores) and of a single sample, over repeated runs.
	BatchSeconds     float64 `json:"batch_seconds"`
	MicrosPerSample  float64 `json:"micros_per_sample"`
	SingleMicros     float64 `json:"single_sample_micros"`
	LatencyRepeats   int     `json:"latency_repeats"`
	Seconds          float64 `json:"seconds"`
	LatencyBatchSize int     `json:"latency_batch_size"`
}

// evalDataset evaluates a classifier on a named data set's test split.
func (a *app) evalDataset(cmd *cobra.Command, modelPath, truthPath string, df dataFlags, start time.Time) error {
	if truthPath != "" {
		return usageErrorf("--truth compares two-layer models; it does not combine with --data %s", df.data)
	}
	if df.x != "" || df.y != "" {
		return usageErrorf("give either --data %s or --x/--y, not both", df.data)
	}
	model, _, err := loadNetwork(modelPath)
	if err != nil {
		return fmt.Errorf("reading --model: %w", err)
	}
	_, test, _, err := labeledSplits(df.data, "test-only", "")
	if err != nil {
		return err
	}
	_, d := test.X.Dims()
	if model.In() != d || model.Out() != test.Classes {
		return inputErrorf("--model maps %d inputs to %d outputs but %s has %d inputs and %d classes", model.In(), model.Out(), df.data, d, test.Classes)
	}
	met, err := model.Evaluate(test.X, test.Labels)
	if err != nil {
		return err
	}
	res := evalDataResult{
		Command: "eval", Model: modelPath, Data: df.data, Ranks: model.Ranks(),
		Parameters: model.NumParams(), MultiplyAdds: model.MultiplyAdds(), Test: met,
	}
	res.Architecture = []int{model.In()}
	for _, l := range model.Layers {
		res.Architecture = append(res.Architecture, l.Out())
	}
	// Latency: medians over repeats, after one warm-up.
	const repeats = 5
	n, _ := test.X.Dims()
	model.Forward(test.X)
	var batch []float64
	for i := 0; i < repeats; i++ {
		if err := cmd.Context().Err(); err != nil {
			return err
		}
		t := time.Now()
		model.Forward(test.X)
		batch = append(batch, time.Since(t).Seconds())
	}
	one := test.X.Slice(0, 1, 0, d).(*mat.Dense)
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
	res.Seconds = time.Since(start).Seconds()
	return a.emit(res, func(w io.Writer) {
		arch := ""
		for i, s := range res.Architecture {
			if i > 0 {
				arch += "-"
			}
			arch += strconv.Itoa(s)
		}
		table(w, [][2]string{
			{"model", fmt.Sprintf("%s (%s, %d layers)", modelPath, arch, len(model.Layers))},
			{"data", fmt.Sprintf("%s test split, %d samples", df.data, n)},
			{"accuracy", fmt.Sprintf("%.4f (%d correct)", met.Accuracy, met.Correct)},
			{"loss", fmt.Sprintf("%.4f (mean cross-entropy)", met.Loss)},
			{"parameters", strconv.Itoa(res.Parameters)},
			{"multiply-adds", fmt.Sprintf("%d per sample", res.MultiplyAdds)},
			{"latency", fmt.Sprintf("%.1f ms per batch of %d (%.2f µs/sample), %.1f µs for one sample (medians)", 1e3*res.BatchSeconds, n, res.MicrosPerSample, res.SingleMicros)},
			{"time", fmt.Sprintf("%.2f s", res.Seconds)},
		})
	})
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
