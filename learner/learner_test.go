package learner

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/twolayer"
)

// torchLinear draws an nn.Linear(in, out) as PyTorch's default init does:
// weight and bias U(−1/√in, 1/√in); bias false leaves it nil.
func torchLinear(in, out int, bias bool, act nn.Activation, rng *rand.Rand) nn.Layer {
	s := 1 / math.Sqrt(float64(in))
	u := func() float64 { return (2*rng.Float64() - 1) * s }
	w := mat.NewDense(out, in, nil)
	for i := range out {
		for j := range in {
			w.Set(i, j, u())
		}
	}
	l := nn.Layer{Weight: w, Act: act}
	if bias {
		l.Bias = make([]float64, out)
		for i := range l.Bias {
			l.Bias[i] = u()
		}
	}
	return l
}

// data queries nn.Sequential(Linear(d, k, bias), ReLU, Linear(k, m, bias))
// on n Gaussian inputs (uniform ones when uniform is set).
func data(d, k, m, n int, bias, uniform bool, seed uint64) (*mat.Dense, *mat.Dense) {
	rng := rand.New(rand.NewPCG(seed, 1))
	net := &nn.MLP{Layers: []nn.Layer{torchLinear(d, k, bias, nn.ReLU, rng), torchLinear(k, m, bias, nn.Identity, rng)}}
	x := mat.NewDense(n, d, nil)
	raw := x.RawMatrix().Data
	for i := range raw {
		if uniform {
			raw[i] = (2*rng.Float64() - 1) * math.Sqrt(3)
		} else {
			raw[i] = rng.NormFloat64()
		}
	}
	return x, net.Forward(x)
}

// The front door sends each kind of data to the learner whose model fits,
// and the answer is certified.
func TestFitChoosesTheLearner(t *testing.T) {
	cases := []struct {
		name          string
		d, k, m, n    int
		bias, uniform bool
		want          Name
	}{
		{"bias-free, several outputs", 10, 3, 5, 20000, false, false, TwoLayer},
		{"PyTorch default (biases)", 10, 3, 5, 20000, true, false, Depth2},
		{"one output, no biases", 8, 3, 1, 20000, false, false, Depth2},
		{"uniform inputs", 4, 2, 3, 2000, false, true, TwoLayer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, y := data(tc.d, tc.k, tc.m, tc.n, tc.bias, tc.uniform, 7)
			res, err := Fit(context.Background(), x, y, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Choice.Learner != tc.want {
				t.Fatalf("learner %s, want %s: %s %v", res.Choice.Learner, tc.want, res.Choice.Reason, res.Choice.Considered)
			}
			if !res.Certificate().Met {
				t.Fatalf("certificate %+v not met (%s)", res.Certificate(), res.Choice.Reason)
			}
			if got := res.Model().Layers[0].Out(); got != tc.k {
				t.Fatalf("%d hidden units, want %d", got, tc.k)
			}
			if (tc.want == Depth2) != (res.Depth2 != nil) || (res.Depth2 == nil) == (res.TwoLayer == nil) {
				t.Fatalf("result holds twolayer %v, depth2 %v", res.TwoLayer != nil, res.Depth2 != nil)
			}
		})
	}
}

// A named two-layer route is a request for that learner, whatever the data.
func TestNamedRouteKeepsTheTwoLayerLearner(t *testing.T) {
	x, y := data(10, 3, 5, 5000, true, false, 8)
	ch, err := Choose(x, y, Options{Options: twolayer.Options{Route: twolayer.UseNoisy}})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Learner != TwoLayer || ch.Bias != nil {
		t.Fatalf("choice %+v", ch)
	}
}

// The two-layer learner reuses the front door's Gaussian check (no second
// read of X): its selection records the very check Choose ran, which is
// twolayer.CheckGaussian of X with the seed.
func TestTwoLayerReusesGaussianCheck(t *testing.T) {
	x, y := data(10, 3, 5, 20000, false, false, 4)
	res, err := Fit(context.Background(), x, y, Options{Options: twolayer.Options{Seed: 9}})
	if err != nil {
		t.Fatal(err)
	}
	if res.TwoLayer == nil || res.TwoLayer.Diagnostics.Selection == nil || res.TwoLayer.Diagnostics.Selection.Gaussian == nil {
		t.Fatalf("no two-layer selection: %+v", res.Choice)
	}
	want, err := twolayer.CheckGaussian(x, 9)
	if err != nil {
		t.Fatal(err)
	}
	if got := *res.TwoLayer.Diagnostics.Selection.Gaussian; got != want || *res.Choice.Gaussian != want {
		t.Fatalf("selection's check %+v, front door's %+v, want %+v", got, *res.Choice.Gaussian, want)
	}
}

// Fit screens for biases only when neither exact route certified the data:
// exact bias-free data are certified by the two-layer learner's exact route
// from the zero-set start and skip the screen (Choose still runs it);
// PyTorch-default data with biases are certified by depth2's exact route
// (the Stein start, RouteSteinPolish) and skip it too; noisy bias-free
// data (no exact route) are screened and stay with twolayer.
func TestFitScreensBiasesOnlyWhenNotCertified(t *testing.T) {
	x, y := data(10, 3, 5, 20000, false, false, 5)
	res, err := Fit(context.Background(), x, y, Options{Options: twolayer.Options{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choice.Learner != TwoLayer || res.Choice.Bias != nil || !res.Certificate().Met ||
		res.TwoLayer.Diagnostics.Start != "zero-set" {
		t.Fatalf("exact bias-free data: choice %+v, certificate %+v", res.Choice, res.Certificate())
	}
	if last := res.Choice.Considered[len(res.Choice.Considered)-1]; !strings.Contains(last, "biases: not tested") {
		t.Fatalf("considered %q", res.Choice.Considered)
	}
	ch, err := Choose(x, y, Options{Options: twolayer.Options{Seed: 1}})
	if err != nil || ch.Bias == nil || ch.Learner != TwoLayer {
		t.Fatalf("Choose: %+v, %v", ch, err)
	}

	xb, yb := data(10, 3, 5, 20000, true, false, 5)
	res, err = Fit(context.Background(), xb, yb, Options{Options: twolayer.Options{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choice.Learner != Depth2 || res.Choice.Bias != nil || res.TwoLayer != nil || !res.Certificate().Met ||
		res.Depth2.Route != depth2.RouteSteinPolish {
		t.Fatalf("biased data: choice %+v", res.Choice)
	}

	rng := rand.New(rand.NewPCG(6, 1))
	for i, raw := 0, y.RawMatrix().Data; i < len(raw); i++ {
		raw[i] += 1e-3 * rng.NormFloat64()
	}
	res, err = Fit(context.Background(), x, y, Options{Options: twolayer.Options{Seed: 1, Hidden: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choice.Learner != TwoLayer || res.Choice.Bias == nil || res.Choice.Bias.Biased || res.TwoLayer.Route != twolayer.RouteNoisy {
		t.Fatalf("noisy bias-free data: choice %+v, route %s", res.Choice, res.TwoLayer.Route)
	}
}

// The caller's options reach the two-layer learner unchanged: a named
// route with a width, a certificate tolerance and a progress callback set
// once runs with each of them.
func TestOptionsReachTheTwoLayerLearner(t *testing.T) {
	x, y := data(4, 2, 3, 30, false, true, 1)
	stages := 0
	opt := Options{Options: twolayer.Options{Route: twolayer.UseWorstCase, Hidden: 2, CertTol: 1e-3, Progress: func(string, int, int) { stages++ }}}
	res, err := Fit(context.Background(), x, y, opt)
	if err != nil {
		t.Fatal(err)
	}
	tl := res.TwoLayer
	if tl == nil || tl.Route != twolayer.RouteWorstCase || tl.Certificate.Tol != 1e-3 || tl.Diagnostics.Hidden != 2 || tl.Diagnostics.HiddenInferred || stages == 0 {
		t.Fatalf("result %+v, %d progress calls; want the worst-case route with k = 2 given and tolerance 1e-3", tl, stages)
	}
}
