package compress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/modelfile"
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

// Keep fractions respect the budget in both modes and with the measured
// allocation, and a wrong width is refused.
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
	// The measured allocation probes the graph's output with each weight
	// compressed.
	res, err := CompressGraph(context.Background(), g, x, Options{Keep: 0.5, Allocation: AllocSensitivity})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params > res.Budget || len(res.Profiles) == 0 {
		t.Errorf("sensitivity allocation: params %d, budget %d, %d profiles", res.Params, res.Budget, len(res.Profiles))
	}
}

// Every weight of the exported ViT — patch embedding, attention's Q, K, V
// and output projections, the MLP's two Linears, the head — is a layer fit
// on the activations that reach it (one row per token of each image, 5
// tokens here); at full rank the compressed graph computes the original's
// outputs, and at keep 0.5 it is smaller, written in the file's opset and
// read back to the same outputs; in opset 17 (LayerNormalization) and 13
// (its decomposition).
func TestCompressGraphViT(t *testing.T) {
	for _, opset := range []int{13, 17} {
		g, err := modelfile.LoadGraphONNX(fmt.Sprintf("../nn/testdata/vit_tiny_opset%d.onnx", opset))
		if err != nil {
			t.Fatal(err)
		}
		compressViT(t, g, opset)
	}
}

func compressViT(t *testing.T, g *nn.Graph, opset int) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := mat.NewDense(200, g.In(), nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = rng.Float64()
	}
	layers := graphLayers(g)
	var names []string
	for _, l := range layers {
		names = append(names, l.name)
	}
	want := []string{"/embed/MatMul", "/blocks.0/attn/q/MatMul", "/blocks.0/attn/k/MatMul", "/blocks.0/attn/v/MatMul",
		"/blocks.0/attn/proj/MatMul", "/blocks.0/fc1/MatMul", "/blocks.0/fc2/MatMul", "/head/Gemm"}
	if !slices.Equal(names, want) {
		t.Fatalf("layers %v, want %v", names, want)
	}
	full := make([]int, len(layers))
	for j, l := range layers {
		r, c := l.w.Dims()
		full[j] = min(r, c)
	}
	res, err := CompressGraph(context.Background(), g, x, Options{Ranks: full})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(g.Forward(x), res.Model.Forward(x)); d > 1e-9 {
		t.Errorf("full rank: outputs differ by %g", d)
	}
	if res.Modules[1].Rows != 200*5 {
		t.Errorf("Q fit on %d rows, want 1000 (images × tokens)", res.Modules[1].Rows)
	}
	res, err = CompressGraph(context.Background(), g, x, Options{Keep: 0.5, Sequential: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params > res.Budget || res.Model.NumParams() != res.Params || res.Model.Opset != opset {
		t.Errorf("keep 0.5: params %d (model %d), budget %d, opset %d (want %d)", res.Params, res.Model.NumParams(), res.Budget, res.Model.Opset, opset)
	}
	var buf bytes.Buffer
	if err := modelfile.WriteGraphONNX(&buf, res.Model, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	back, err := modelfile.ReadGraphONNX(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(back.Forward(x), res.Model.Forward(x)) {
		t.Error("the compressed ViT read back computes other outputs")
	}
}

// A weight whose input holds the samples on a later axis (after a
// Transpose to [tokens, N, width]) is fit on rows taken sample by sample,
// and one whose input merges them with the tokens (a Reshape to
// [N·tokens, width]) is left dense as it is: its rows are not one
// sample's.
func TestCompressGraphSampleAxis(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	g := &nn.Graph{
		Input: "x", InputShape: []int{3, 4}, Output: "y",
		Consts: map[string]*nn.GraphTensor{
			"W1": graphTensor(testutil.RandDense(rng, 4, 4)), "W2": graphTensor(testutil.RandDense(rng, 4, 4)),
			"flat": {Shape: []int{2}, Data: []float64{-1, 4}, Int: true}, "back": {Shape: []int{3}, Data: []float64{-1, 3, 4}, Int: true},
		},
		Nodes: []nn.GraphNode{
			{Name: "t", Op: "Transpose", Inputs: []string{"x"}, Outputs: []string{"xt"}, Attrs: map[string]nn.GraphAttr{"perm": {Kind: "ints", Ints: []int64{1, 0, 2}}}},
			{Name: "mm1", Op: "MatMul", Inputs: []string{"xt", "W1"}, Outputs: []string{"a"}},
			{Name: "tb", Op: "Transpose", Inputs: []string{"a"}, Outputs: []string{"at"}, Attrs: map[string]nn.GraphAttr{"perm": {Kind: "ints", Ints: []int64{1, 0, 2}}}},
			{Name: "flat", Op: "Reshape", Inputs: []string{"at", "flat"}, Outputs: []string{"f"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"f", "W2"}, Outputs: []string{"b"}},
			{Name: "back", Op: "Reshape", Inputs: []string{"b", "back"}, Outputs: []string{"y"}},
		},
	}
	x := testutil.RandDense(rng, 50, g.In())
	res, err := CompressGraph(context.Background(), g, x, Options{Ranks: []int{4}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modules) != 1 || res.Modules[0].Node != "mm1" || res.Modules[0].Rows != 150 {
		t.Fatalf("modules %+v, want mm1 alone on 150 rows", res.Modules)
	}
	if d := maxDiff(g.Forward(x), res.Model.Forward(x)); d > 1e-9 {
		t.Errorf("full rank: outputs differ by %g", d)
	}
}

// maxDiff bounds the largest |a_ij − b_ij| (by the largest row sum).
func maxDiff(a, b *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(a, b)
	return mat.Norm(&d, math.Inf(1))
}

// Distillation of a graph (a residual block whose rank-2 weight is cut to
// rank 1, so the layer fit errs) lowers the output error on samples it
// never saw, keeps the parameter count, the layout and the opset, and
// leaves the original graph as it was.
func TestCompressGraphDistill(t *testing.T) {
	g := lowRankMixer(rand.New(rand.NewPCG(1, 2)))
	g.Opset = 17
	rng := rand.New(rand.NewPCG(19, 20))
	x := testutil.RandDense(rng, 400, g.In())
	test := testutil.RandDense(rng, 200, g.In())
	want := g.Forward(test)
	relErr := func(m *nn.Graph) float64 {
		var d mat.Dense
		d.Sub(m.Forward(test), want)
		return mat.Norm(&d, 2) / mat.Norm(want, 2)
	}
	o := Options{Ranks: []int{1, 4, 3}, Sequential: true}
	plain, err := CompressGraph(context.Background(), g, x, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Distill = DistillOptions{Epochs: 20, Seed: 1}
	dist, err := CompressGraph(context.Background(), g, x, o)
	if err != nil {
		t.Fatal(err)
	}
	r := dist.Distill
	if r == nil || r.BestEpoch == 0 || r.Objective != "logits" || !(r.Divergence < r.StartDivergence) {
		t.Fatalf("distillation report %+v", r)
	}
	before, after := relErr(plain.Model), relErr(dist.Model)
	t.Logf("test output error %.4f → %.4f; held-out squared error %.4g → %.4g (epoch %d)", before, after, r.StartDivergence, r.Divergence, r.BestEpoch)
	if !(after < before) {
		t.Errorf("distillation did not lower the test output error: %.4f → %.4f", before, after)
	}
	if dist.Model.NumParams() != plain.Model.NumParams() || dist.Model.String() != plain.Model.String() || dist.Model.Opset != 17 {
		t.Errorf("distilled %s (%d params, opset %d), layer fit %s (%d params)", dist.Model, dist.Model.NumParams(), dist.Model.Opset, plain.Model, plain.Model.NumParams())
	}
	if !mat.Equal(g.Forward(test), want) {
		t.Error("distillation changed the original graph")
	}
}
