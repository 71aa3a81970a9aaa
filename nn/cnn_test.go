package nn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/internal/testutil/nets"
	"github.com/relurec/relurec/nn"
)

// naiveCNNForward computes the CNN on one sample with direct loops over the
// PyTorch definitions (no im2col): conv as a sum over channels and kernel
// positions with zero padding, max pooling over in-image positions.
func naiveCNNForward(net *nn.CNN, x []float64) []float64 {
	sh := net.Input
	h := append([]float64(nil), x...)
	for _, l := range net.Layers {
		switch l := l.(type) {
		case *nn.Conv2d:
			out, _ := l.OutShape(sh)
			s := l.Strides()
			kh, kw := l.Kernel[0], l.Kernel[1]
			y := make([]float64, out.Size())
			for o := 0; o < out.C; o++ {
				for r := 0; r < out.H; r++ {
					for q := 0; q < out.W; q++ {
						v := 0.0
						if l.Bias != nil {
							v = l.Bias[o]
						}
						for c := 0; c < sh.C; c++ {
							for i := 0; i < kh; i++ {
								for j := 0; j < kw; j++ {
									iy, ix := r*s[0]-l.Padding[0]+i, q*s[1]-l.Padding[1]+j
									if iy >= 0 && iy < sh.H && ix >= 0 && ix < sh.W {
										v += l.Weight.At(o, (c*kh+i)*kw+j) * h[(c*sh.H+iy)*sh.W+ix]
									}
								}
							}
						}
						y[(o*out.H+r)*out.W+q] = v
					}
				}
			}
			h, sh = y, out
		case *nn.ReLULayer:
			for i, v := range h {
				h[i] = math.Max(v, 0)
			}
		case *nn.MaxPool2d:
			out, _ := l.OutShape(sh)
			s := l.Strides()
			y := make([]float64, out.Size())
			for c := 0; c < out.C; c++ {
				for r := 0; r < out.H; r++ {
					for q := 0; q < out.W; q++ {
						m := math.Inf(-1)
						for i := 0; i < l.Kernel[0]; i++ {
							for j := 0; j < l.Kernel[1]; j++ {
								iy, ix := r*s[0]-l.Padding[0]+i, q*s[1]-l.Padding[1]+j
								if iy >= 0 && iy < sh.H && ix >= 0 && ix < sh.W {
									m = math.Max(m, h[(c*sh.H+iy)*sh.W+ix])
								}
							}
						}
						y[(c*out.H+r)*out.W+q] = m
					}
				}
			}
			h, sh = y, out
		case *nn.Flatten:
			sh, _ = l.OutShape(sh)
		case *nn.Linear:
			r, k := l.Weight.Dims()
			y := make([]float64, r)
			for o := range y {
				for j := 0; j < k; j++ {
					y[o] += l.Weight.At(o, j) * h[j]
				}
				if l.Bias != nil {
					y[o] += l.Bias[o]
				}
			}
			h, sh = y, nn.FeatureShape{C: r, H: 1, W: 1, Flat: true}
		}
	}
	return h
}

// Forward (im2col + one GEMM per conv, in chunks) equals the direct
// definition of every module, and Hidden's last layer equals Forward.
func TestCNNForwardMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	net := nets.RandCNN(rng)
	if err := net.Validate(); err != nil {
		t.Fatal(err)
	}
	n := 2*nn.CNNChunk + 3 // several chunks, the last one partial
	x := testutil.RandDense(rng, n, net.In())
	y := net.Forward(x)
	if r, c := y.Dims(); r != n || c != 5 || net.Out() != 5 {
		t.Fatalf("Forward gave %d×%d, Out %d; want %d×5", r, c, net.Out(), n)
	}
	worst := 0.0
	for i := 0; i < n; i++ {
		want := naiveCNNForward(net, x.RawRowView(i))
		for j, v := range want {
			worst = math.Max(worst, math.Abs(y.At(i, j)-v)/(1+math.Abs(v)))
		}
	}
	if worst > 1e-12 {
		t.Fatalf("Forward differs from the direct loops by %.3g", worst)
	}
	if d := testutil.DiffNormInf(net.Hidden(x, len(net.Layers)-1), y); d != 0 {
		t.Fatalf("Hidden(last) differs from Forward by %g", d)
	}
	// A conv's output before its bias is Unfold(input)·Weightᵀ.
	shapes, _ := net.Shapes()
	c2 := net.Layers[3].(*nn.Conv2d)
	p, err := c2.Unfold(net.Hidden(x, 2), shapes[3])
	if err != nil {
		t.Fatal(err)
	}
	var z mat.Dense
	z.Mul(p, c2.Weight.T())
	out := net.Hidden(x, 3)
	hw := shapes[4].H * shapes[4].W
	for s := 0; s < n; s++ {
		for q := 0; q < hw; q++ {
			for o := 0; o < shapes[4].C; o++ {
				if d := math.Abs(z.At(s*hw+q, o) - out.At(s, o*hw+q)); d > 1e-12 {
					t.Fatalf("Unfold·Wᵀ differs from the layer's output by %g at sample %d position %d channel %d", d, s, q, o)
				}
			}
		}
	}
	if got := net.Ranks(); len(got) != 4 || got[0] != 0 || got[1] != 2 || got[2] != 3 || got[3] != 0 {
		t.Fatalf("Ranks %v, want [0 2 3 0]", got)
	}
	wantMA := 3*18*9*7 + 2*18*shapes[4].H*shapes[4].W + 4*2*shapes[5].H*shapes[5].W + 3*shapes[8].Size() + 6*3 + 5*6
	if ma := net.MultiplyAdds(); ma != wantMA {
		t.Fatalf("MultiplyAdds %d, want %d", ma, wantMA)
	}
}

// Evaluate scores the logits of Forward.
func TestCNNEvaluate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	net := nets.RandCNN(rng)
	x := testutil.RandDense(rng, 50, net.In())
	labels := make([]int, 50)
	for i := range labels {
		labels[i] = i % 5
	}
	m, err := net.Evaluate(x, labels)
	if err != nil {
		t.Fatal(err)
	}
	pred := net.Predict(x)
	correct := 0
	for i, p := range pred {
		if p == labels[i] {
			correct++
		}
	}
	if m.Correct != correct || m.Samples != 50 {
		t.Fatalf("Evaluate %+v, Predict gives %d correct", m, correct)
	}
	if loss := nn.SoftmaxCrossEntropy(net.Forward(x), labels, nil); math.Abs(loss-m.Loss) > 1e-12 {
		t.Fatalf("loss %g, want %g", m.Loss, loss)
	}
	if _, err := net.Evaluate(testutil.RandDense(rng, 3, 5), labels[:3]); !errors.Is(err, errs.ErrInput) {
		t.Fatalf("wrong input width: %v", err)
	}
}

// Shapes that do not chain are refused, naming the layer and what is wrong.
func TestCNNValidateErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	in := nn.FeatureShape{C: 2, H: 6, W: 6}
	for name, tc := range map[string]struct {
		net  *nn.CNN
		want string
	}{
		"no layers":        {&nn.CNN{Input: in}, "no layers"},
		"zero input":       {&nn.CNN{Input: nn.FeatureShape{C: 1}, Layers: []nn.CNNLayer{&nn.ReLULayer{}}}, "input shape"},
		"wrong channels":   {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Conv2d{Weight: testutil.RandDense(rng, 4, 27), Kernel: [2]int{3, 3}}}}, "layer 0 (Conv2d): takes 3 input channels"},
		"kernel mismatch":  {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Conv2d{Weight: testutil.RandDense(rng, 4, 10), Kernel: [2]int{3, 3}}}}, "not a multiple of the kernel"},
		"kernel too large": {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Conv2d{Weight: testutil.RandDense(rng, 4, 2*49), Kernel: [2]int{7, 7}}}}, "larger than the padded"},
		"no kernel":        {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Conv2d{Weight: testutil.RandDense(rng, 4, 2)}}}, "kernel 0×0"},
		"bias length":      {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Conv2d{Weight: testutil.RandDense(rng, 4, 2), Kernel: [2]int{1, 1}, Bias: []float64{1}}}}, "bias of length 1"},
		"linear on maps":   {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Linear{Weight: testutil.RandDense(rng, 3, 72)}}}, "add a Flatten"},
		"linear width":     {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Flatten{}, &nn.Linear{Weight: testutil.RandDense(rng, 3, 70)}}}, "layer 1 (Linear): takes 70 inputs"},
		"conv after flat":  {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Flatten{}, &nn.Conv2d{Weight: testutil.RandDense(rng, 4, 72), Kernel: [2]int{1, 1}}}}, "after Flatten"},
		"pool padding":     {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.MaxPool2d{Kernel: [2]int{2, 2}, Padding: [2]int{2, 0}}}}, "half the kernel"},
		"nil layer":        {&nn.CNN{Input: in, Layers: []nn.CNNLayer{nil}}, "layer 0 is nil"},
		"NaN":              {&nn.CNN{Input: in, Layers: []nn.CNNLayer{&nn.Conv2d{Weight: mat.NewDense(1, 2, []float64{1, math.NaN()}), Kernel: [2]int{1, 1}}}}, "weight[0,1] is NaN"},
	} {
		err := tc.net.Validate()
		if err == nil || !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrInput error containing %q", name, err, tc.want)
		}
	}
	if _, err := nn.Unfold(testutil.RandDense(rng, 2, 71), in, [2]int{3, 3}, [2]int{}, [2]int{}); !errors.Is(err, errs.ErrInput) {
		t.Errorf("Unfold of 71 values as %v: %v", in, err)
	}
}

// BenchmarkCNNForward runs the Fashion-MNIST example CNN of bench/
// cnn_fashion.py (Conv 1→16 and 16→32, 3×3 pad 1, pools of 2, Linear
// 1568→128→10) on a batch of 256 images. Work per image: 1.22 million
// multiply-adds (conv 0.11 M + 0.90 M, Linear 0.20 M), 2.4 MFLOP, so at
// the pure-Go GEMM's ~16 GFLOP/s the floor is ~150 µs per image (~40 ms
// per batch); the unfolding copies 0.04 M values per image.
func BenchmarkCNNForward(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	conv := func(out, in int) *nn.Conv2d {
		return &nn.Conv2d{Weight: testutil.RandDense(rng, out, in*9), Bias: testutil.RandVec(rng, out), Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}}
	}
	net := &nn.CNN{Input: nn.FeatureShape{C: 1, H: 28, W: 28}, Layers: []nn.CNNLayer{
		conv(16, 1), &nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{2, 2}},
		conv(32, 16), &nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{2, 2}},
		&nn.Flatten{}, &nn.Linear{Weight: testutil.RandDense(rng, 128, 1568), Bias: testutil.RandVec(rng, 128)}, &nn.ReLULayer{},
		&nn.Linear{Weight: testutil.RandDense(rng, 10, 128), Bias: testutil.RandVec(rng, 10)},
	}}
	x := testutil.RandDense(rng, 256, 784)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		net.Forward(x)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*256), "µs/image")
}

// A factored conv (FactorConv) computes the conv of weight U·V and bias
// U·vb + ub, and Ranks reads its rank back.
func TestFactorConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	c := &nn.Conv2d{Kernel: [2]int{3, 2}, Stride: [2]int{2, 1}, Padding: [2]int{1, 1}}
	v, u := testutil.RandDense(rng, 2, 3*6), testutil.RandDense(rng, 5, 2)
	vb, ub := testutil.RandVec(rng, 2), testutil.RandVec(rng, 5)
	var w mat.Dense
	w.Mul(u, v)
	c.Weight = &w
	c.Bias = make([]float64, 5)
	mat.NewVecDense(5, c.Bias).MulVec(u, mat.NewVecDense(2, vb))
	for i := range c.Bias {
		c.Bias[i] += ub[i]
	}
	in := nn.FeatureShape{C: 3, H: 7, W: 6}
	dense := &nn.CNN{Input: in, Layers: []nn.CNNLayer{c, &nn.ReLULayer{}}}
	f := nn.FactorConv(c, v, u, vb, ub)
	fact := &nn.CNN{Input: in, Layers: []nn.CNNLayer{f[0], f[1], &nn.ReLULayer{}}}
	if err := fact.Validate(); err != nil {
		t.Fatal(err)
	}
	x := testutil.RandDense(rng, 10, in.Size())
	if d := testutil.MaxRelDiff(fact.Forward(x), dense.Forward(x)); d > 1e-12 {
		t.Fatalf("factored conv differs by %g", d)
	}
	if r := fact.Ranks(); len(r) != 1 || r[0] != 2 {
		t.Fatalf("Ranks %v, want [2]", r)
	}
	if fact.NumParams() != 2*18+2+5*2+5 {
		t.Fatalf("NumParams %d", fact.NumParams())
	}
}
