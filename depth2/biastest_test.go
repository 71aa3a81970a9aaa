package depth2

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// torchDefault draws a network as nn.Linear's default init does: weights and
// biases U(−1/√fan_in, 1/√fan_in). withBias false zeroes both bias vectors.
func torchDefault(d, k, p int, withBias bool, rng *rand.Rand) *nn.Depth2 {
	u := func(r, c int, fan int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		s := 1 / math.Sqrt(float64(fan))
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				m.Set(i, j, (2*rng.Float64()-1)*s)
			}
		}
		return m
	}
	net := &nn.Depth2{W: u(k, d, d), B: make([]float64, k), A: u(p, k, k), C: make([]float64, p)}
	if withBias {
		copy(net.B, u(1, k, d).RawRowView(0))
		copy(net.C, u(1, p, k).RawRowView(0))
	}
	return net
}

// The claims behind TestBiases: a bias-free ReLU network's Hermite moments
// pass (|z| well under the threshold, noise or not), PyTorch's default
// biases fail it by far, hidden or output biases alone each fail it.
func TestBiasesDetected(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name             string
		d, k, p, n       int
		hiddenB, outputC bool
		noise            float64
		want             bool
	}{
		{"bias-free 20-5-8", 20, 5, 8, 100000, false, false, 0, false},
		{"bias-free 30-10-1 noisy", 30, 10, 1, 100000, false, false, 0.1, false},
		{"torch default 20-5-8", 20, 5, 8, 100000, true, true, 0, true},
		{"torch default 30-10-1", 30, 10, 1, 100000, true, true, 0, true},
		// Hidden biases alone are the hardest case: PyTorch's default
		// magnitudes give |z| ≈ 6 at n = 1e5, growing as √n.
		{"hidden biases only", 20, 5, 8, 300000, true, false, 0, true},
		{"output bias only", 20, 5, 8, 100000, false, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := torchDefault(tc.d, tc.k, tc.p, tc.hiddenB || tc.outputC, rng)
			if !tc.hiddenB {
				clear(net.B)
			}
			if !tc.outputC {
				clear(net.C)
			}
			x := testutil.RandDense(rng, tc.n, tc.d)
			y := net.Forward(x)
			if tc.noise > 0 {
				raw := y.RawMatrix().Data
				for i := range raw {
					raw[i] += tc.noise * rng.NormFloat64()
				}
			}
			res, err := TestBiases(x, y)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("output z %.1f, odd z %.1f", res.OutputZ, res.OddZ)
			if res.Biased != tc.want {
				t.Fatalf("Biased = %v, want %v (%+v)", res.Biased, tc.want, res)
			}
		})
	}
}

// Without Options.Hidden, Fit infers the width from T̂_2 before counting
// samples: the sample floor is the one for the width found, not for m = d
// units. Here d = 10 (m = d would need n ≥ 71 500) and 3 units (n ≥ 1500),
// with n = 20 000. It also checks that no silent unit (output weights ~1e-13
// left by deflation) is counted: the network must load into nn.Linear(10, 3).
func TestFitInfersWidthBeforeCountingSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	net := torchDefault(10, 3, 4, true, rng)
	x := testutil.RandDense(rng, 20000, 10)
	res, err := Fit(context.Background(), x, net.Forward(x), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Diagnostics.Hidden != 3 || !res.Diagnostics.HiddenInferred || !res.Certificate.Met {
		t.Fatalf("hidden %d (inferred %v), certificate %+v", res.Diagnostics.Hidden, res.Diagnostics.HiddenInferred, res.Certificate)
	}
}

// Data stored in float32 (X and Y rounded to float32, as a float32 .npy gives
// them) are ordinary: the certificate's tolerance follows the precision
// (certify.DefaultTol), the refinement stops at the rounding floor instead of
// chasing it, and the parameters come back to the data's precision.
func TestFloat32DataCertifiedAtTheirPrecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	net := torchDefault(10, 3, 4, true, rng)
	x := testutil.RandDense(rng, 50000, 10)
	y := net.Forward(x)
	for _, m := range [][]float64{x.RawMatrix().Data, y.RawMatrix().Data} {
		for i, v := range m {
			m[i] = float64(float32(v))
		}
	}
	res, err := Fit(context.Background(), x, y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Diagnostics.Precision != "float32" || !res.Certificate.Met || res.Certificate.Tol > 1e-6 || res.Diagnostics.Hidden != 3 {
		t.Fatalf("precision %q, hidden %d, certificate %+v", res.Diagnostics.Precision, res.Diagnostics.Hidden, res.Certificate)
	}
	want := net.Normalize()
	for i, b := range res.Model.B {
		best := math.Inf(1)
		for _, w := range want.B {
			best = math.Min(best, math.Abs(b-w))
		}
		if best > 1e-6 {
			t.Errorf("bias %d: %v is %g from the nearest true bias", i, b, best)
		}
	}
}
