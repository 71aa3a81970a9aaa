package compress

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// tinyCNN is 2×6×6 → Conv2d(2, out, 3×3, pad 1) → ReLU → MaxPool 2 →
// Conv2d(out, 8, 3×3, pad 1) → ReLU → Flatten → Linear(72, 5); the first
// conv's weight has rank convRank (0: random, full rank).
func tinyCNN(rng *rand.Rand, out, convRank int) *nn.CNN {
	w := testutil.RandDense(rng, out, 18)
	if convRank > 0 {
		var p mat.Dense
		p.Mul(testutil.RandDense(rng, out, convRank), testutil.RandDense(rng, convRank, 18))
		w = &p
	}
	return &nn.CNN{Input: nn.FeatureShape{C: 2, H: 6, W: 6}, Layers: []nn.CNNLayer{
		&nn.Conv2d{Weight: w, Bias: testutil.RandVec(rng, out), Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}},
		&nn.ReLULayer{},
		&nn.MaxPool2d{Kernel: [2]int{2, 2}},
		&nn.Conv2d{Weight: testutil.RandDense(rng, 8, out*9), Bias: testutil.RandVec(rng, 8), Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}},
		&nn.ReLULayer{},
		&nn.Flatten{},
		&nn.Linear{Weight: testutil.RandDense(rng, 5, 72), Bias: testutil.RandVec(rng, 5)},
	}}
}

// A conv layer whose weight is exactly rank 2 is compressed at rank 2 with
// no error, written as a 3×3 conv to 2 channels and a 1×1 conv, and the
// network computes what the dense one does.
func TestCompressCNNExactLowRankConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	net := tinyCNN(rng, 12, 2)
	x := testutil.RandDense(rng, 300, net.In())
	for _, seq := range []bool{false, true} {
		res, err := CompressCNN(context.Background(), net, x, Options{Ranks: []int{2, 0, 0}, Sequential: seq})
		if err != nil {
			t.Fatal(err)
		}
		l0 := res.Layers[0]
		if l0.Rank != 2 || l0.Dense || l0.Error > 1e-10 || l0.Params != 2*(18+12)+12 {
			t.Fatalf("seq %v: conv layer %+v, want rank 2, error 0, params 72", seq, l0)
		}
		c0, ok0 := res.Model.Layers[0].(*nn.Conv2d)
		c1, ok1 := res.Model.Layers[1].(*nn.Conv2d)
		if !ok0 || !ok1 || c0.OutChannels() != 2 || c0.Kernel != [2]int{3, 3} || c0.Padding != [2]int{1, 1} || c1.Kernel != [2]int{1, 1} || c1.OutChannels() != 12 {
			t.Fatalf("seq %v: factored conv written as %v", seq, res.Model)
		}
		if r := res.Model.Ranks(); len(r) != 3 || r[0] != 2 || r[1] != 0 || r[2] != 0 {
			t.Fatalf("seq %v: ranks %v", seq, r)
		}
		// Sequentially the later (dense) layers are refit by least squares
		// on the compressed stream, equal to the original up to rounding;
		// the refit of the second conv, whose inputs come from a rank-2
		// conv, is ill-conditioned and amplifies that rounding.
		y, yc := net.Forward(x), res.Model.Forward(x)
		tol := 1e-8
		if seq {
			tol = 1e-6 * mat.Norm(y, math.Inf(1))
		}
		if d := testutil.DiffNormInf(yc, y); d > tol {
			t.Fatalf("seq %v: compressed outputs differ by %g", seq, d)
		}
		if res.Params != res.Model.NumParams() || res.DenseParams != net.NumParams() {
			t.Fatalf("seq %v: params %d/%d, model %d/%d", seq, res.Params, res.DenseParams, res.Model.NumParams(), net.NumParams())
		}
		if m := res.Modules[0]; m.Kind != "conv2d" || m.Rows != 300*36 || m.Patches != 300*36 {
			t.Fatalf("module report %+v", m)
		}
	}
}

// At full rank the two layers FactorConv writes compute the dense conv: a
// full-rank data-driven fit on the unfolded patches, put back as a conv to
// r channels and a 1×1 conv, gives the dense network's outputs.
func TestCNNFactoredFullRankEqualsDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	net := tinyCNN(rng, 6, 0)
	x := testutil.RandDense(rng, 100, net.In())
	conv := net.Layers[3].(*nn.Conv2d)
	shapes, _ := net.Shapes()
	h := net.Hidden(x, 2)
	p, err := conv.Unfold(h, shapes[3])
	if err != nil {
		t.Fatal(err)
	}
	fit, err := FitLayer(Problem{W: mat.DenseCopyOf(conv.Weight.T()), Bias: conv.Bias, X: p}, MethodData, LayerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := fit.Rank(fit.MaxRank())
	if f.Rank() != 8 {
		t.Fatalf("full rank %d, want 8", f.Rank())
	}
	pair := nn.FactorConv(conv, mat.DenseCopyOf(f.A.T()), mat.DenseCopyOf(f.B.T()), f.InBias, f.Bias)
	fac := &nn.CNN{Input: net.Input, Layers: append(append(append([]nn.CNNLayer{}, net.Layers[:3]...), pair[0], pair[1]), net.Layers[4:]...)}
	if d := testutil.DiffNormInf(fac.Forward(x), net.Forward(x)); d > 1e-9 {
		t.Fatalf("full-rank factored CNN differs from the dense one by %g", d)
	}
}

// The budget holds for every allocation and mode, the factored layers save
// parameters, and the report adds up.
func TestCompressCNNBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	net := tinyCNN(rng, 16, 0)
	x := testutil.RandDense(rng, 400, net.In())
	for _, alloc := range []Allocation{AllocGlobal, AllocUniform, AllocSVDLLM2} {
		for _, keep := range []float64{0.3, 0.6} {
			for _, seq := range []bool{false, true} {
				res, err := CompressCNN(context.Background(), net, x, Options{Keep: keep, Allocation: alloc, Sequential: seq})
				if err != nil {
					t.Fatalf("%s keep %g seq %v: %v", alloc, keep, seq, err)
				}
				if res.Budget != int(math.Floor(keep*float64(net.NumParams()))) || res.Params > res.Budget || res.Params != res.Model.NumParams() {
					t.Fatalf("%s keep %g seq %v: params %d, budget %d, model %d", alloc, keep, seq, res.Params, res.Budget, res.Model.NumParams())
				}
				factored := 0
				for _, l := range res.Layers {
					if !l.Dense {
						factored++
						if l.Rank*(l.In+l.Out) >= l.In*l.Out {
							t.Fatalf("%s keep %g: layer %d factored at rank %d that saves nothing (%d×%d)", alloc, keep, l.Layer, l.Rank, l.Out, l.In)
						}
					}
					if math.IsNaN(l.Error) || l.Error > 1 {
						t.Fatalf("layer %+v", l)
					}
				}
				if factored == 0 {
					t.Fatalf("%s keep %g: nothing factored", alloc, keep)
				}
				if err := res.Model.Validate(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Compressing the compressed network multiplies its factors out first.
	res, err := CompressCNN(context.Background(), net, x, Options{Keep: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	again, err := CompressCNN(context.Background(), res.Model, x, Options{Keep: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Warnings) == 0 || !strings.Contains(again.Warnings[0].String(), "factored") || again.DenseParams != net.NumParams() {
		t.Fatalf("recompression: warnings %v, dense params %d", again.Warnings, again.DenseParams)
	}
}

func TestCompressCNNBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	net := tinyCNN(rng, 6, 0)
	x := testutil.RandDense(rng, 50, net.In())
	nan := mat.DenseCopyOf(x)
	nan.Set(3, 4, math.NaN())
	broken := tinyCNN(rng, 6, 0)
	broken.Layers[6] = &nn.Linear{Weight: testutil.RandDense(rng, 5, 71)}
	cases := []struct {
		name string
		net  *nn.CNN
		x    *mat.Dense
		o    Options
	}{
		{"nil network", nil, x, Options{}},
		{"shapes do not chain", broken, x, Options{}},
		{"no data", net, nil, Options{}},
		{"wrong width", net, testutil.RandDense(rng, 50, 71), Options{}},
		{"NaN", net, nan, Options{}},
		{"keep > 1", net, x, Options{Keep: 1.5}},
		{"ranks per layer", net, x, Options{Ranks: []int{1, 1}}},
		{"negative rank", net, x, Options{Ranks: []int{1, -1, 0}}},
		{"sensitivity", net, x, Options{Keep: 0.5, Allocation: AllocSensitivity}},
		{"unknown method", net, x, Options{Method: "nope"}},
		{"tiny budget", net, x, Options{Keep: 0.01}},
	}
	for _, c := range cases {
		_, err := CompressCNN(context.Background(), c.net, c.x, c.o)
		if !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", c.name, err)
		}
	}
}
