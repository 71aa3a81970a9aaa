package nn

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/memtest"
)

// broadcastGraph is a graph whose constants, of a few hundred values, blow
// each sample of shape [1, 1, 16] up to [a, b, 16] by broadcasting, then
// average it back to 16 values: a·b·16 values of activations per sample
// that no declared shape shows.
func broadcastGraph(a, b int) *Graph {
	rng := rand.New(rand.NewPCG(11, 12))
	return &Graph{
		Input: "x", InputShape: []int{1, 1, 16}, Output: "y",
		Consts: map[string]*GraphTensor{"c1": randTensor(rng, b, 1), "c2": randTensor(rng, a, 1, 1)},
		Nodes: []GraphNode{
			{Name: "wide", Op: "Add", Inputs: []string{"x", "c1"}, Outputs: []string{"h1"}},
			{Name: "wider", Op: "Add", Inputs: []string{"h1", "c2"}, Outputs: []string{"h2"}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"h2"}, Outputs: []string{"y"}, Attrs: map[string]GraphAttr{"axes": {Kind: "ints", Ints: []int64{1, 2}}, "keepdims": {Kind: "int", I: 0}}},
		},
	}
}

// A graph whose activations inferred from its constants would not fit
// the memory budget is refused with an error naming the size, having
// allocated no more than the budget: broadcasting each sample to
// [512, 512, 16].
func TestGraphOverBudgetRefused(t *testing.T) {
	dataio.SetMemoryBudget(16 << 20)
	defer dataio.SetMemoryBudget(0)
	var err error
	n := memtest.Allocated(func() { err = broadcastGraph(512, 512).Validate() })
	if !errors.Is(err, dataio.ErrTooLarge) || !strings.Contains(err.Error(), "needed but the memory budget is 16.8 MB") {
		t.Errorf("got %v, want ErrTooLarge naming the size and the budget", err)
	}
	if n > 16<<20 {
		t.Errorf("allocated %s before refusing, more than the budget", dataio.FormatBytes(float64(n)))
	}
}

// The evaluator runs a batch in pieces of rows sized to the memory budget:
// 128 samples of 256 KiB of activations each (32 MiB in one run), under an
// 8 MiB budget, never hold more than twice the budget; the outputs are
// those of an unbounded run.
func TestGraphForwardChunkedToBudget(t *testing.T) {
	g := broadcastGraph(64, 32)
	rng := rand.New(rand.NewPCG(13, 14))
	x := randDense(rng, 128, 16)
	want := g.Forward(x)
	dataio.SetMemoryBudget(8 << 20)
	defer dataio.SetMemoryBudget(0)
	var got *mat.Dense
	peak := memtest.Peak(func() { got = g.Forward(x) })
	if !mat.Equal(got, want) {
		t.Fatal("outputs differ under the budget")
	}
	if peak > 16<<20 {
		t.Fatalf("Forward held %s of heap under an 8 MiB budget", dataio.FormatBytes(float64(peak)))
	}
}
