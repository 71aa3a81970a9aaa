package compress

import (
	"context"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
	"math/rand/v2"
	"strings"
	"testing"
)

// DefaultOptions is the recipe on an MLP — sequential, and at budgets up to
// a quarter the sensitivity allocation (AllocAuto) and distillation, above
// it the global allocation without —
// the same on a graph, and reduces on a CNN to the global allocation
// without distillation and without an error; FastOptions is the zero value's behaviour.
func TestDefaultOptionsByNetworkAndBudget(t *testing.T) {
	net, x, _ := teacher(21)
	ctx := context.Background()
	for _, c := range []struct {
		keep     float64
		measured bool // sensitivity allocation and distillation
	}{{0.2, true}, {0.5, false}} {
		o := DefaultOptions(net)
		o.Keep = c.keep
		o.Distill.Epochs = 2
		res, err := CompressMLP(ctx, net, x, o)
		if err != nil {
			t.Fatal(c.keep, err)
		}
		alloc := AllocGlobal
		if c.measured {
			alloc = AllocSensitivity
		}
		if !res.Sequential || !strings.Contains(res.Selection, "("+string(alloc)+" allocation)") || (len(res.Profiles) > 0) != c.measured || (res.Distill != nil) != c.measured {
			t.Fatalf("keep %g: sequential %v, selection %q, %d profiles, distillation %+v", c.keep, res.Sequential, res.Selection, len(res.Profiles), res.Distill)
		}
	}
	fast, err := CompressMLP(ctx, net, x, FastOptions())
	if err != nil {
		t.Fatal(err)
	}
	zero, err := CompressMLP(ctx, net, x, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fast.Sequential || fast.Selection != zero.Selection || fast.Params != zero.Params || fast.Distill != nil {
		t.Fatalf("FastOptions: sequential %v, %q (%d parameters) against the zero value's %q (%d)", fast.Sequential, fast.Selection, fast.Params, zero.Selection, zero.Params)
	}

	// A graph gets the MLP's recipe: sequential, and at keep 0.2 the
	// sensitivity allocation and distillation.
	grng := rand.New(rand.NewPCG(1, 2))
	g := &nn.Graph{
		Input: "x", InputShape: []int{30}, Output: "y", Opset: 17,
		Consts: map[string]*nn.GraphTensor{"W": graphTensor(testutil.RandDense(grng, 30, 30)), "W2": graphTensor(testutil.RandDense(grng, 30, 10))},
		Nodes: []nn.GraphNode{
			{Name: "mm", Op: "MatMul", Inputs: []string{"x", "W"}, Outputs: []string{"a"}},
			{Name: "relu", Op: "Relu", Inputs: []string{"a"}, Outputs: []string{"r"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"r", "W2"}, Outputs: []string{"y"}},
		},
	}
	og := DefaultOptions(g)
	og.Keep, og.Distill.Epochs = 0.2, 2
	gres, err := CompressGraph(ctx, g, testutil.RandDense(rand.New(rand.NewPCG(8, 9)), 300, g.In()), og)
	if err != nil {
		t.Fatal(err)
	}
	if !gres.Sequential || !strings.Contains(gres.Selection, "("+string(AllocSensitivity)+" allocation)") || gres.Distill == nil {
		t.Fatalf("graph: sequential %v, selection %q, distillation %+v", gres.Sequential, gres.Selection, gres.Distill)
	}

	cnn := tinyCNN(rand.New(rand.NewPCG(4, 5)), 6, 0)
	o := DefaultOptions(cnn)
	o.Keep = 0.2
	res, err := CompressCNN(ctx, cnn, testutil.RandDense(rand.New(rand.NewPCG(6, 7)), 200, cnn.In()), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sequential || !strings.Contains(res.Selection, string(AllocGlobal)) || res.Distill != nil {
		t.Fatalf("CNN: sequential %v, selection %q, distillation %+v", res.Sequential, res.Selection, res.Distill)
	}
}

// A trained network's dead ReLU units (never active on the calibration
// rows) make its compression warn about nothing: they are counted in the
// next layer's whitening record (Dropped) and the result carries no
// warning, with the default recipe and with --fast alike.
func TestDeadUnitsCompressWithoutWarnings(t *testing.T) {
	net, x, _ := teacher(22)
	for _, u := range []int{3, 17, 40} { // dead: a bias no input overcomes
		net.Layers[0].Bias[u] = -1e6
	}
	for _, o := range []Options{DefaultOptions(net), FastOptions()} {
		o.Keep = 0.2
		o.Distill.Epochs = min(o.Distill.Epochs, 1)
		res, err := CompressMLP(context.Background(), net, x, o)
		if err != nil {
			t.Fatal(err)
		}
		warn := errs.Strings(res.Warnings)
		for _, l := range res.Layers {
			warn = append(warn, l.Warnings...)
		}
		if len(warn) != 0 || res.Layers[1].Whitening == nil || res.Layers[1].Whitening.Dropped < 3 {
			t.Fatalf("sequential %v: warnings %q, layer 1 whitening %+v", o.Sequential, warn, res.Layers[1].Whitening)
		}
	}
}

// CanProbe, which the command uses to say the allocation it will run,
// answers as the compression driver does: whether the network's layer
// source measures output errors (prober).
func TestCanProbeMatchesSources(t *testing.T) {
	net, _, _ := teacher(21)
	cnn := tinyCNN(rand.New(rand.NewPCG(4, 5)), 6, 0)
	g := &nn.Graph{}
	for _, c := range []struct {
		net nn.Network
		src layerSource
	}{{net, &mlpSource{net: net}}, {cnn, &cnnSource{net: cnn}}, {g, &graphSource{g: g}}} {
		if _, ok := c.src.(prober); ok != CanProbe(c.net) {
			t.Errorf("%T: the source probes: %v, CanProbe: %v", c.net, ok, CanProbe(c.net))
		}
	}
}
