package compress

import (
	"context"
	"fmt"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// mlpAsCNN is net as a CNN of Linear and ReLU modules on flat inputs.
func mlpAsCNN(net *nn.MLP) *nn.CNN {
	c := &nn.CNN{Input: nn.FeatureShape{C: net.In(), H: 1, W: 1, Flat: true}}
	for _, l := range net.Layers {
		c.Layers = append(c.Layers, &nn.Linear{Weight: l.Weight, Bias: l.Bias})
		if l.Act == nn.ReLU {
			c.Layers = append(c.Layers, &nn.ReLULayer{})
		}
	}
	return c
}

// mlpAsGraph is net as a graph of MatMul, Add and Relu nodes.
func mlpAsGraph(net *nn.MLP) *nn.Graph {
	g := &nn.Graph{Input: "x", InputShape: []int{net.In()}, Consts: map[string]*nn.GraphTensor{}}
	in := "x"
	for i, l := range net.Layers {
		w, b, out := fmt.Sprintf("W%d", i), fmt.Sprintf("b%d", i), fmt.Sprintf("y%d", i)
		g.Consts[w] = graphTensor(mat.DenseCopyOf(l.Weight.T()))
		g.Consts[b] = &nn.GraphTensor{Shape: []int{len(l.Bias)}, Data: l.Bias}
		g.Nodes = append(g.Nodes,
			nn.GraphNode{Op: "MatMul", Inputs: []string{in, w}, Outputs: []string{out + "m"}},
			nn.GraphNode{Op: "Add", Inputs: []string{out + "m", b}, Outputs: []string{out}})
		in = out
		if l.Act == nn.ReLU {
			g.Nodes = append(g.Nodes, nn.GraphNode{Op: "Relu", Inputs: []string{out}, Outputs: []string{out + "r"}})
			in = out + "r"
		}
	}
	g.Output = in
	return g
}

// The three adapters are one driver: an MLP compressed as an MLP, as a CNN
// of Linear modules and as a graph of MatMul nodes gets the same ranks,
// parameter counts and compressed outputs.
func TestDriverSameForEveryAdapter(t *testing.T) {
	net, x, _ := teacher(5)
	ctx := context.Background()
	for _, o := range []Options{{Keep: 0.3}, {Ranks: []int{3, 0, 2}}, {Energy: 0.9}, {Keep: 0.3, Allocation: AllocSVDLLM2}} {
		m, err := CompressMLP(ctx, net, x, o)
		if err != nil {
			t.Fatal(err)
		}
		c, err := CompressCNN(ctx, mlpAsCNN(net), x, o)
		if err != nil {
			t.Fatal(err)
		}
		g, err := CompressGraph(ctx, mlpAsGraph(net), x, o)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Model.Forward(x)
		for name, r := range map[string]struct {
			res *Result
			net nn.Network
		}{"CNN": {&c.Result, c.Model}, "graph": {&g.Result, g.Model}} {
			if r.res.Params != m.Params || r.res.Budget != m.Budget || len(r.res.Layers) != len(m.Layers) {
				t.Fatalf("%s, %+v: params %d budget %d layers %d, MLP %d %d %d", name, o, r.res.Params, r.res.Budget, len(r.res.Layers), m.Params, m.Budget, len(m.Layers))
			}
			for i, l := range r.res.Layers {
				if l.Rank != m.Layers[i].Rank || l.Dense != m.Layers[i].Dense || l.Params != m.Layers[i].Params {
					t.Errorf("%s, %+v: layer %d rank %d dense %v params %d, MLP %d %v %d", name, o, i, l.Rank, l.Dense, l.Params, m.Layers[i].Rank, m.Layers[i].Dense, m.Layers[i].Params)
				}
			}
			if e := diffNorm(want, r.net.Forward(x)) / mat.Norm(want, 2); e > 1e-9 {
				t.Errorf("%s, %+v: outputs differ from the MLP's by %g (relative)", name, o, e)
			}
		}
	}
}
