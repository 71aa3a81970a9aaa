package nn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// The trainer's gradient of a batch, run in chunks of gradChunk samples,
// is Graph.Gradient's on the whole batch.
func TestGraphTrainerGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := residualGraph(rng)
	n := 2*gradChunk + 5
	x := mat.NewDense(n, g.In(), randValue(rng, 0, n*g.In()).data)
	target := mat.NewDense(n, g.Out(), randValue(rng, 0, n*g.Out()).data)
	idx := rng.Perm(n)
	xs := mat.NewDense(n, g.In(), nil)
	ts := mat.NewDense(n, g.Out(), nil)
	for r, i := range idx {
		xs.SetRow(r, x.RawRowView(i))
		ts.SetRow(r, target.RawRowView(i))
	}
	names := []string{"W1", "b1", "W2", "Wh"}
	tr := newGraphTrainer(g, names)
	_, _, err := tr.gradient(x, idx, func(z, grad *mat.Dense, _ []int) (float64, int) {
		return LogitSquaredError(z, ts, grad), 0
	})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := g.Values(xs)
	if err != nil {
		t.Fatal(err)
	}
	z, _ := g.ForwardFrom(vals, len(g.Nodes))
	dz := mat.NewDense(n, g.Out(), nil)
	LogitSquaredError(z, ts, dz)
	want, err := g.Gradient(vals, dz, names)
	if err != nil {
		t.Fatal(err)
	}
	for j, p := range tr.params() {
		for k, v := range p.grad {
			if math.Abs(v-want[j][k]) > 1e-12*(1+math.Abs(want[j][k])) {
				t.Fatalf("%s[%d]: chunked gradient %g, whole-batch %g", names[j], k, v, want[j][k])
			}
		}
	}
}

// DistillGraph brings a graph whose weights were perturbed back towards
// the outputs of the original: the held-out error falls, the constants
// not named stay as they are, and the kept epoch is the best held-out one.
func TestDistillGraph(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	teacher := residualGraph(rng)
	student := &Graph{Input: teacher.Input, InputShape: teacher.InputShape, Output: teacher.Output, Nodes: teacher.Nodes, Consts: map[string]*GraphTensor{}}
	for k, c := range teacher.Consts {
		student.Consts[k] = &GraphTensor{Shape: c.Shape, Data: slices.Clone(c.Data)}
	}
	for _, name := range []string{"W1", "W2"} {
		for i := range student.Consts[name].Data {
			student.Consts[name].Data[i] += 0.3 * rng.NormFloat64()
		}
	}
	wh := slices.Clone(student.Consts["Wh"].Data)
	x := mat.NewDense(300, teacher.In(), randValue(rng, 0, 300*teacher.In()).data)
	xt, xh := x.Slice(0, 250, 0, teacher.In()).(*mat.Dense), x.Slice(250, 300, 0, teacher.In()).(*mat.Dense)
	zt, zh := teacher.Forward(xt), teacher.Forward(xh)
	res, err := DistillGraph(context.Background(), student, []string{"W1", "b1", "W2"}, xt, zt, DistillOptions{
		TrainOptions: TrainOptions{Epochs: 20, BatchSize: 32, LearningRate: 1e-2},
		Objective:    "logits", Holdout: xh, HoldoutTeacher: zh,
	})
	if err != nil {
		t.Fatal(err)
	}
	after := LogitSquaredError(student.Forward(xh), zh, nil)
	t.Logf("held-out ½‖z − t‖²: %.4g → %.4g (best epoch %d)", *res.StartHoldoutLoss, after, res.BestEpoch)
	if res.BestEpoch == 0 || after > 0.5**res.StartHoldoutLoss {
		t.Errorf("held-out error %.4g → %.4g, best epoch %d: distillation did not help", *res.StartHoldoutLoss, after, res.BestEpoch)
	}
	if best := *res.Epochs[res.BestEpoch-1].HoldoutLoss; math.Abs(best-after) > 1e-12*after {
		t.Errorf("the graph's held-out error %.6g is not the best epoch's %.6g", after, best)
	}
	if !slices.Equal(wh, student.Consts["Wh"].Data) {
		t.Error("a constant not named changed")
	}
	if _, err := DistillGraph(context.Background(), student, []string{"h"}, xt, zt, DistillOptions{}); err == nil {
		t.Error("a computed value as a parameter: no error")
	}
}

// DistillGraph refuses a batch whose values would not fit the memory
// budget, naming the option that shrinks it, and runs with that option.
func TestDistillGraphOverBudget(t *testing.T) {
	dataio.SetMemoryBudget(16 << 20)
	defer dataio.SetMemoryBudget(0)
	g := broadcastGraph(64, 64) // 0.5 MB of values per sample
	rng := rand.New(rand.NewPCG(13, 14))
	x := mat.NewDense(40, g.In(), randValue(rng, 0, 40*g.In()).data)
	z := g.Forward(x)
	_, err := DistillGraph(context.Background(), g, []string{"c1"}, x, z, DistillOptions{TrainOptions: TrainOptions{Epochs: 1}, Objective: "logits"})
	if !errors.Is(err, dataio.ErrTooLarge) || !strings.Contains(err.Error(), "BatchSize") {
		t.Fatalf("a 40-sample batch of 0.5 MB samples in 16 MB: error %v, want dataio.ErrTooLarge naming BatchSize", err)
	}
	if _, err := DistillGraph(context.Background(), g, []string{"c1"}, x, z, DistillOptions{TrainOptions: TrainOptions{Epochs: 1, BatchSize: 4}, Objective: "logits"}); err != nil {
		t.Fatalf("batches of 4: %v", err)
	}
}
