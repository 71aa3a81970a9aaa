package compress

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

func graphTensor(m *mat.Dense) *nn.GraphTensor {
	r, c := m.Dims()
	return &nn.GraphTensor{Shape: []int{r, c}, Data: denseRows(m)}
}

// lowRankMixer is a residual token/channel block on samples of 6 tokens ×
// 8 channels whose channel MatMul (8 → 12) has rank 2: h = x +
// ReLU(x·W + b)·W2, then the mean over tokens and a Gemm head.
func lowRankMixer(rng *rand.Rand) *nn.Graph {
	var w mat.Dense
	w.Mul(testutil.RandDense(rng, 8, 2), testutil.RandDense(rng, 2, 12))
	b := testutil.RandDense(rng, 1, 12)
	return &nn.Graph{
		Input: "x", InputShape: []int{6, 8}, Output: "y",
		Consts: map[string]*nn.GraphTensor{
			"W": graphTensor(&w), "b": {Shape: []int{12}, Data: b.RawRowView(0)},
			"W2": graphTensor(testutil.RandDense(rng, 12, 8)), "Wh": graphTensor(testutil.RandDense(rng, 3, 8)),
		},
		Nodes: []nn.GraphNode{
			{Name: "mm", Op: "MatMul", Inputs: []string{"x", "W"}, Outputs: []string{"a"}},
			{Name: "add", Op: "Add", Inputs: []string{"b", "a"}, Outputs: []string{"ab"}},
			{Name: "relu", Op: "Relu", Inputs: []string{"ab"}, Outputs: []string{"r"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"r", "W2"}, Outputs: []string{"d"}},
			{Name: "res", Op: "Add", Inputs: []string{"x", "d"}, Outputs: []string{"h"}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"h"}, Outputs: []string{"m"}, Attrs: map[string]nn.GraphAttr{"axes": {Kind: "ints", Ints: []int64{1}}, "keepdims": {Kind: "int", I: 0}}},
			{Name: "head", Op: "Gemm", Inputs: []string{"m", "Wh"}, Outputs: []string{"y"}, Attrs: map[string]nn.GraphAttr{"transB": {Kind: "int", I: 1}}},
		},
	}
}

// An exactly rank-2 MatMul compressed at rank 2 keeps the graph's outputs
// (to rounding); its bias Add is folded in and the result has two MatMul
// nodes in its place.
func TestCompressGraphExactLowRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	g := lowRankMixer(rng)
	x := testutil.RandDense(rng, 300, g.In())
	res, err := CompressGraph(context.Background(), g, x, Options{Ranks: []int{2, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Layers) != 3 || res.Layers[0].Rank != 2 || !res.Layers[1].Dense || res.Modules[0].Bias != "b" {
		t.Fatalf("layers %+v, modules %+v", res.Layers, res.Modules)
	}
	if res.Layers[0].Error > 1e-10 {
		t.Errorf("rank-2 weight at rank 2: relative error %g", res.Layers[0].Error)
	}
	if res.Modules[0].Rows != 300*6 || res.Modules[0].Total != 300*6 {
		t.Errorf("rows %d of %d; want 1800 (images × tokens)", res.Modules[0].Rows, res.Modules[0].Total)
	}
	yo, yc := g.Forward(x), res.Model.Forward(x)
	var d mat.Dense
	d.Sub(yo, yc)
	if e := mat.Norm(&d, math.Inf(1)); e > 1e-9 {
		t.Errorf("outputs differ by %g", e)
	}
	mm := 0
	for _, n := range res.Model.Nodes {
		if n.Op == "MatMul" {
			mm++
		}
	}
	if mm != 3 || res.Model.NumParams() != res.Params || res.Params >= res.DenseParams {
		t.Errorf("%d MatMul nodes, params %d (model %d) of %d", mm, res.Params, res.Model.NumParams(), res.DenseParams)
	}
}

// Keep fractions respect the budget in both modes, and a wrong width or a
// measured allocation is refused.
func TestCompressGraphKeep(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	g := lowRankMixer(rng)
	x := testutil.RandDense(rng, 200, g.In())
	for _, seq := range []bool{false, true} {
		res, err := CompressGraph(context.Background(), g, x, Options{Keep: 0.5, Sequential: seq})
		if err != nil {
			t.Fatal(err)
		}
		if res.Params > res.Budget || res.Model.NumParams() != res.Params {
			t.Errorf("sequential %v: params %d, budget %d", seq, res.Params, res.Budget)
		}
	}
	if _, err := CompressGraph(context.Background(), g, testutil.RandDense(rng, 5, 7), Options{}); !errors.Is(err, ErrInput) {
		t.Errorf("wrong width: %v", err)
	}
	if _, err := CompressGraph(context.Background(), g, x, Options{Allocation: AllocSensitivity}); !errors.Is(err, ErrInput) {
		t.Errorf("sensitivity allocation: %v", err)
	}
}
