package compress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// teacher returns a random 3-layer ReLU MLP whose first layer has low-rank
// structure plus noise, and calibration/held-out inputs.
func teacher(seed uint64) (*nn.MLP, *mat.Dense, *mat.Dense) {
	rng := rand.New(rand.NewPCG(seed, 3))
	sizes := []int{40, 60, 30, 5}
	net := &nn.MLP{}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		w := mul(testutil.RandDense(rng, out, 6), testutil.RandDense(rng, 6, in))
		noise := testutil.RandDense(rng, out, in)
		noise.Scale(0.3, noise)
		w.Add(w, noise)
		w.Scale(1/math.Sqrt(float64(6*in)), w)
		b := make([]float64, out)
		for j := range b {
			b[j] = 0.1 * rng.NormFloat64()
		}
		act := nn.ReLU
		if i+2 == len(sizes) {
			act = nn.Identity
		}
		net.Layers = append(net.Layers, nn.Layer{Weight: w, Bias: b, Act: act})
	}
	return net, anisotropic(800, 40, rng), anisotropic(300, 40, rng)
}

func TestCompressMLPBudgetAndAccounting(t *testing.T) {
	net, x, h := teacher(1)
	ctx := context.Background()
	for _, method := range Methods {
		if method == MethodConvex || method == MethodReLU {
			continue // slow; covered below at one budget
		}
		for _, keep := range []float64{0.15, 0.4, 0.8, 1} {
			for _, seq := range []bool{false, true} {
				res, err := CompressMLP(ctx, net, x, Options{Method: method, Keep: keep, Sequential: seq, Holdout: h})
				if err != nil {
					t.Fatalf("%s keep %g: %v", method, keep, err)
				}
				if res.Params > res.Budget || res.Budget != int(math.Floor(keep*float64(net.NumParams()))) {
					t.Fatalf("%s keep %g: %d parameters for a budget of %d", method, keep, res.Params, res.Budget)
				}
				if got := res.Model.NumParams(); got != res.Params {
					t.Fatalf("%s: model has %d parameters, report says %d", method, got, res.Params)
				}
				for _, l := range res.Layers {
					if l.Params > l.DenseParams {
						t.Fatalf("%s keep %g layer %d: %d parameters > dense %d", method, keep, l.Layer, l.Params, l.DenseParams)
					}
					if l.HeldoutError == nil || math.IsNaN(l.Error) {
						t.Fatalf("%s: layer %d lacks errors", method, l.Layer)
					}
				}
				if err := res.Model.Validate(); err != nil {
					t.Fatal(err)
				}
				if keep == 1 && res.Params != net.NumParams() {
					t.Fatalf("keep 1 should leave the network dense, got %d of %d", res.Params, net.NumParams())
				}
			}
		}
	}
	for _, method := range []Method{MethodConvex, MethodReLU} {
		res, err := CompressMLP(ctx, net, x, Options{Method: method, Keep: 0.4, Sequential: true,
			Layer: LayerOptions{Convex: ConvexOptions{MaxRows: 200, MaxIter: 50}, ReLU: ReLUOptions{MaxIter: 30, Constraint: ConvexOptions{MaxRows: 200}}}})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if res.Params > res.Budget {
			t.Fatalf("%s: over budget", method)
		}
	}
}

// The end-to-end expectation on a synthetic teacher: the
// sequential data-driven network is closer to the original than truncated
// SVD at the same budget.
func TestCompressMLPDataBeatsSVD(t *testing.T) {
	net, x, h := teacher(2)
	ref := net.Forward(h)
	errOf := func(o Options) float64 {
		o.Keep = 0.3
		res, err := CompressMLP(context.Background(), net, x, o)
		if err != nil {
			t.Fatal(err)
		}
		return testutil.RelDiff(res.Model.Forward(h), ref)
	}
	seq := errOf(Options{Method: MethodData, Sequential: true})
	non := errOf(Options{Method: MethodData})
	svd := errOf(Options{Method: MethodSVD})
	t.Logf("held-out output error at 30%%: sequential %.4g, non-sequential %.4g, SVD %.4g", seq, non, svd)
	if !(seq < svd && non < svd) {
		t.Fatalf("data-driven (%.4g, %.4g) not better than SVD %.4g", seq, non, svd)
	}
}

func TestCompressMLPSelectionModes(t *testing.T) {
	net, x, _ := teacher(3)
	ctx := context.Background()
	res, err := CompressMLP(ctx, net, x, Options{Ranks: []int{3, 0, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Model.Ranks(); r[0] != 3 || r[1] != 0 || r[2] != 2 {
		t.Fatalf("ranks %v", r)
	}
	// A rank that would not save parameters keeps the layer dense.
	res, err = CompressMLP(ctx, net, x, Options{Ranks: []int{3, 1000, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Layers[1].Dense || len(res.Warnings) == 0 {
		t.Fatalf("rank 1000 not refused: %+v", res.Layers[1])
	}
	for _, target := range []float64{0.3, 0.1} {
		res, err = CompressMLP(ctx, net, x, Options{TargetError: target})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range res.Layers {
			if l.LocalError > target*(1+1e-9) && !l.Dense {
				t.Fatalf("target %g: layer %d local error %g", target, l.Layer, l.LocalError)
			}
		}
	}
	for _, method := range []Method{MethodSVD, MethodASVD} {
		res, err = CompressMLP(ctx, net, x, Options{Method: method, TargetError: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range res.Layers {
			if !l.Dense && l.LocalError > 0.2*(1+1e-9) {
				t.Fatalf("%s: layer %d local error %g above target", method, l.Layer, l.LocalError)
			}
		}
	}
	res, err = CompressMLP(ctx, net, x, Options{Energy: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Layers {
		if !l.Dense && l.Energy < 0.9 {
			t.Fatalf("energy %g below 0.9 at layer %d", l.Energy, l.Layer)
		}
	}
	uni, err := CompressMLP(ctx, net, x, Options{Keep: 0.3, Allocation: AllocUniform})
	if err != nil {
		t.Fatal(err)
	}
	if uni.Params > uni.Budget {
		t.Fatalf("uniform allocation over budget: %d > %d", uni.Params, uni.Budget)
	}
}

func TestCompressMLPDeterministicAndFactoredInput(t *testing.T) {
	net, x, h := teacher(4)
	o := Options{Keep: 0.3, Sequential: true}
	a, err := CompressMLP(context.Background(), net, x, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := CompressMLP(context.Background(), net, x, o)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(a.Model.Forward(h), b.Model.Forward(h)) {
		t.Fatal("two runs differ")
	}
	// Compressing a compressed model multiplies it out first.
	c, err := CompressMLP(context.Background(), a.Model, x, Options{Keep: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) == 0 {
		t.Fatal("no warning about factored input layers")
	}
}

func TestCompressMLPBadInput(t *testing.T) {
	net, x, _ := teacher(5)
	ctx := context.Background()
	broken := &nn.MLP{Layers: []nn.Layer{net.Layers[0], net.Layers[2]}} // 60 outputs into a 30-input layer
	xn := mat.DenseCopyOf(x)
	xn.Set(1, 1, math.Inf(1))
	cases := []struct {
		name string
		net  *nn.MLP
		x    *mat.Dense
		o    Options
	}{
		{"shapes do not chain", broken, x, Options{}},
		{"calibration width", net, x.Slice(0, 100, 0, 39).(*mat.Dense), Options{}},
		{"keep 0", net, x, Options{Keep: -0.1}},
		{"keep > 1", net, x, Options{Keep: 1.5}},
		{"NaN keep", net, x, Options{Keep: math.NaN()}},
		{"budget too small", net, x, Options{Keep: 0.001}},
		{"Inf", net, xn, Options{}},
		{"method", net, x, Options{Method: "zip"}},
		{"ranks length", net, x, Options{Ranks: []int{1}}},
		{"negative rank", net, x, Options{Ranks: []int{1, -1, 1}}},
		{"energy", net, x, Options{Energy: 2}},
		{"allocation", net, x, Options{Allocation: "x"}},
		{"nil calibration", net, nil, Options{}},
	}
	for _, c := range cases {
		if _, err := CompressMLP(ctx, c.net, c.x, c.o); !errors.Is(err, ErrInput) {
			t.Errorf("%s: got %v, want ErrInput", c.name, err)
		}
	}
}

// TestFashionMNISTSmall trains a small MLP on part of Fashion-MNIST and checks
// that data-driven compression keeps more accuracy than truncated SVD. It
// skips when the data set is not installed (scripts/install-datasets.sh).
func TestFashionMNISTSmall(t *testing.T) {
	net, calib, test := smallFashionMLP(t, []int{784, 64, 32, 10})
	base, _ := net.Evaluate(test.X, test.Labels)
	acc := func(method Method) float64 {
		res, err := CompressMLP(context.Background(), net, calib, Options{Method: method, Keep: 0.15, Sequential: true})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := res.Model.Evaluate(test.X, test.Labels)
		return m.Accuracy
	}
	data, svd := acc(MethodData), acc(MethodSVD)
	t.Logf("accuracy: dense %.4f, data-driven %.4f, SVD %.4f at 15%% of the parameters", base.Accuracy, data, svd)
	if base.Accuracy < 0.78 {
		t.Fatalf("the small model only reached %.3f", base.Accuracy)
	}
	if !(data > svd) || base.Accuracy-data > 0.05 {
		t.Fatalf("data-driven %.4f vs SVD %.4f (dense %.4f)", data, svd, base.Accuracy)
	}
}

// Sequential data-driven compression refits a layer it keeps dense on the
// compressed inputs: the refit is least squares on the calibration data, so
// its calibration error can only be lower than the original weights', and
// the parameter count does not change.
func TestSequentialRefitsDenseLayers(t *testing.T) {
	net, x, _ := teacher(3)
	L := len(net.Layers)
	ranks := make([]int, L)
	for i := 0; i < L-1; i++ {
		ranks[i] = 2
	}
	res, err := CompressMLP(context.Background(), net, x, Options{Method: MethodData, Ranks: ranks, Sequential: true})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Layers[L-1]
	if !last.Dense || !last.Refit || last.Params != last.DenseParams {
		t.Fatalf("last layer: %+v", last)
	}
	// The same layer with its original weights on the same compressed inputs.
	prefix := &nn.MLP{Layers: res.Model.Layers[:len(res.Model.Layers)-1]}
	xc := prefix.Forward(x)
	orig := net.Layers[L-1]
	want := net.Hidden(x, L-1)
	errWith := func(l nn.Layer) float64 {
		got := (&nn.MLP{Layers: []nn.Layer{{Weight: l.Weight, Bias: l.Bias, Act: nn.Identity}}}).Forward(xc)
		var d mat.Dense
		d.Sub(got, want)
		return mat.Norm(&d, 2)
	}
	refit := res.Model.Layers[len(res.Model.Layers)-1]
	if a, b := errWith(refit), errWith(orig); !(a < b) {
		t.Errorf("refit error %.4g not below the original weights' %.4g", a, b)
	} else {
		t.Logf("calibration error of the last layer: original weights %.4g, refit %.4g", b, a)
	}
}

// smallFashionMLP trains an MLP of the given sizes on part of Fashion-MNIST,
// reading only the 10 000 test images (fast): 6000 train the model (10
// epochs, seed 1), 2000 calibrate, 2000 measure. It skips when the data
// set is not installed (scripts/install-datasets.sh). The tests that ask
// for the same sizes share one network, trained once; they must not modify
// it or the data.
func smallFashionMLP(t *testing.T, sizes []int) (*nn.MLP, *mat.Dense, *dataio.Labeled) {
	t.Helper()
	if err := dataio.FashionMNISTAvailable(""); err != nil {
		t.Skipf("Fashion-MNIST not installed (run scripts/install-datasets.sh): %v", err)
	}
	fashionMLPs.Lock()
	defer fashionMLPs.Unlock()
	key := fmt.Sprint(sizes)
	if f, ok := fashionMLPs.m[key]; ok {
		return f.net, f.calib, f.test
	}
	te, err := dataio.LoadFashionMNIST("", "test")
	if err != nil {
		t.Fatal(err)
	}
	trainSet := te.Head(6000)
	net, err := nn.NewMLP(sizes, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := train.MLP(context.Background(), net, trainSet.X, trainSet.Labels, train.Options{Epochs: 10, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f := fashionMLP{net, te.Slice(6000, 8000).X, te.Slice(8000, 10000)}
	fashionMLPs.m[key] = f
	return f.net, f.calib, f.test
}

// fashionMLP is one network smallFashionMLP trained, with its data.
type fashionMLP struct {
	net   *nn.MLP
	calib *mat.Dense
	test  *dataio.Labeled
}

// fashionMLPs holds the networks smallFashionMLP trained, by sizes.
var fashionMLPs = struct {
	sync.Mutex
	m map[string]fashionMLP
}{m: map[string]fashionMLP{}}
