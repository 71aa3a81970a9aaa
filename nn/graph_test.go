package nn

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func randTensor(rng *rand.Rand, shape ...int) *GraphTensor {
	t := &GraphTensor{Shape: shape, Data: make([]float64, numel(shape))}
	for i := range t.Data {
		t.Data[i] = rng.NormFloat64()
	}
	return t
}

// residualGraph is a tiny mixer-like block on samples of 3 tokens × 4
// channels: h = x + ReLU(x·W1 + b1)·W2, the mean over the channels of hᵀ
// (so per token), then Gemm(·, Wh, bh) with transB.
func residualGraph(rng *rand.Rand) *Graph {
	return &Graph{
		Input: "x", InputShape: []int{3, 4}, Output: "y",
		Consts: map[string]*GraphTensor{
			"W1": randTensor(rng, 4, 5), "b1": randTensor(rng, 5), "W2": randTensor(rng, 5, 4),
			"Wh": randTensor(rng, 2, 3), "bh": randTensor(rng, 2),
		},
		Nodes: []GraphNode{
			{Name: "mm1", Op: "MatMul", Inputs: []string{"x", "W1"}, Outputs: []string{"a"}},
			{Name: "add1", Op: "Add", Inputs: []string{"b1", "a"}, Outputs: []string{"b"}},
			{Name: "relu", Op: "Relu", Inputs: []string{"b"}, Outputs: []string{"c"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"c", "W2"}, Outputs: []string{"d"}},
			{Name: "res", Op: "Add", Inputs: []string{"x", "d"}, Outputs: []string{"h"}},
			{Name: "tr", Op: "Transpose", Inputs: []string{"h"}, Outputs: []string{"ht"}, Attrs: map[string]GraphAttr{"perm": {Kind: "ints", Ints: []int64{0, 2, 1}}}},
			{Name: "mean", Op: "ReduceMean", Inputs: []string{"ht"}, Outputs: []string{"m"}, Attrs: map[string]GraphAttr{"axes": {Kind: "ints", Ints: []int64{1}}, "keepdims": {Kind: "int", I: 0}}},
			{Name: "head", Op: "Gemm", Inputs: []string{"m", "Wh", "bh"}, Outputs: []string{"y"}, Attrs: map[string]GraphAttr{"transB": {Kind: "int", I: 1}}},
		},
	}
}

// residualDirect computes residualGraph with plain loops.
func residualDirect(g *Graph, x []float64) []float64 {
	c := g.Consts
	h := make([]float64, 12)
	for t := 0; t < 3; t++ {
		for o := 0; o < 4; o++ {
			h[t*4+o] = x[t*4+o]
		}
		for k := 0; k < 5; k++ {
			s := c["b1"].Data[k]
			for i := 0; i < 4; i++ {
				s += x[t*4+i] * c["W1"].Data[i*5+k]
			}
			s = math.Max(s, 0)
			for o := 0; o < 4; o++ {
				h[t*4+o] += s * c["W2"].Data[k*4+o]
			}
		}
	}
	y := make([]float64, 2)
	for j := 0; j < 2; j++ {
		y[j] = c["bh"].Data[j]
		for t := 0; t < 3; t++ {
			m := 0.0
			for o := 0; o < 4; o++ {
				m += h[t*4+o] / 4
			}
			y[j] += m * c["Wh"].Data[j*3+t]
		}
	}
	return y
}

func TestGraphForwardResidual(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := residualGraph(rng)
	x := randDense(rng, 7, 12)
	y := g.Forward(x)
	if r, c := y.Dims(); r != 7 || c != 2 || g.Out() != 2 || g.In() != 12 {
		t.Fatalf("output %d×%d, In %d, Out %d", r, c, g.In(), g.Out())
	}
	for i := 0; i < 7; i++ {
		want := residualDirect(g, x.RawRowView(i))
		for j, w := range want {
			if d := math.Abs(y.At(i, j) - w); d > 1e-12 {
				t.Fatalf("sample %d output %d: %v, direct %v", i, j, y.At(i, j), w)
			}
		}
	}
	if p := g.NumParams(); p != 20+5+20+6+2 {
		t.Errorf("NumParams %d", p)
	}
	if m := g.MultiplyAdds(); m != 3*4*5+3*5*4+3*2 {
		t.Errorf("MultiplyAdds %d", m)
	}
}

func TestGraphRefusesUnsupported(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := residualGraph(rng)
	g.Nodes[2].Op = "Sigmoid"
	err := g.Validate()
	if err == nil || !strings.Contains(err.Error(), `"relu"`) || !strings.Contains(err.Error(), "Sigmoid") || !errors.Is(err, ErrInput) {
		t.Fatalf("Sigmoid node: %v", err)
	}
	// An operator that mixes samples is refused.
	g = residualGraph(rng)
	g.Nodes[6].Attrs["axes"] = GraphAttr{Kind: "ints", Ints: []int64{0}}
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `"mean"`) {
		t.Fatalf("ReduceMean over the batch: %v", err)
	}
}
