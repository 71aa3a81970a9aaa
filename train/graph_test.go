package train

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
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/internal/testutil/nets"
	"github.com/relurec/relurec/nn"
)

// DistillGraph brings a graph whose weights were perturbed back towards
// the outputs of the original: the held-out error falls, the constants
// not named stay as they are, and the kept epoch is the best held-out one.
func TestDistillGraph(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	teacher := nets.ResidualGraph(rng)
	student := &nn.Graph{Input: teacher.Input, InputShape: teacher.InputShape, Output: teacher.Output, Nodes: teacher.Nodes, Consts: map[string]*nn.GraphTensor{}}
	for k, c := range teacher.Consts {
		student.Consts[k] = &nn.GraphTensor{Shape: c.Shape, Data: slices.Clone(c.Data)}
	}
	for _, name := range []string{"W1", "W2"} {
		for i := range student.Consts[name].Data {
			student.Consts[name].Data[i] += 0.3 * rng.NormFloat64()
		}
	}
	wh := slices.Clone(student.Consts["Wh"].Data)
	x := testutil.RandDense(rng, 300, teacher.In())
	xt, xh := x.Slice(0, 250, 0, teacher.In()).(*mat.Dense), x.Slice(250, 300, 0, teacher.In()).(*mat.Dense)
	zt, zh := teacher.Forward(xt), teacher.Forward(xh)
	res, err := DistillGraph(context.Background(), student, []string{"W1", "b1", "W2"}, xt, zt, DistillOptions{
		Options:   Options{Epochs: 20, BatchSize: 32, LearningRate: 1e-2},
		Objective: "logits", Holdout: xh, HoldoutTeacher: zh,
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
	rng := rand.New(rand.NewPCG(13, 14))
	g := nets.ResidualGraph(rng)
	x := testutil.RandDense(rng, 40, g.In())
	z := g.Forward(x)
	// Room for the values of 20 samples: not for a batch of 40 run forward
	// and back, enough for one of 4.
	dataio.SetMemoryBudget(int64(20 * g.SampleBytes()))
	defer dataio.SetMemoryBudget(0)
	_, err := DistillGraph(context.Background(), g, []string{"W1"}, x, z, DistillOptions{Options: Options{Epochs: 1}, Objective: "logits"})
	if !errors.Is(err, dataio.ErrTooLarge) || !strings.Contains(err.Error(), "BatchSize") {
		t.Fatalf("a 40-sample batch in the memory of 20 samples: error %v, want dataio.ErrTooLarge naming BatchSize", err)
	}
	if _, err := DistillGraph(context.Background(), g, []string{"W1"}, x, z, DistillOptions{Options: Options{Epochs: 1, BatchSize: 4}, Objective: "logits"}); err != nil {
		t.Fatalf("batches of 4: %v", err)
	}
}
