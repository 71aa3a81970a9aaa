package depth2

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/metrics"
)

// The exact route on PyTorch-default networks with biases and at least as
// many outputs as units: every parameter exact to rounding (float64) or to
// float32 precision (X and Y rounded to float32), without the moments of
// order 3–4 or the refinement.
func TestExactRouteCertifiesBiasedNetworks(t *testing.T) {
	for _, c := range []struct {
		d, k, p, n int
		f32        bool
	}{{20, 5, 8, 30000, false}, {30, 10, 12, 40000, false}, {20, 5, 8, 30000, true}, {10, 3, 3, 20000, false}} {
		rng := rand.New(rand.NewPCG(uint64(c.d), uint64(c.k)))
		net := torchDefault(c.d, c.k, c.p, true, rng)
		X := testutil.RandDense(rng, c.n, c.d)
		Y := net.Forward(X)
		if c.f32 {
			for _, m := range []*mat.Dense{X, Y} {
				for i, v := range m.RawMatrix().Data {
					m.RawMatrix().Data[i] = float64(float32(v))
				}
			}
		}
		res, err := Fit(context.Background(), X, Y, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Route != RouteSteinPolish || !res.Certificate.Met || res.Diagnostics.Hidden != c.k {
			t.Fatalf("%+v: route %s (%s), k %d, certificate %+v", c, res.Route, res.Diagnostics.Exact, res.Diagnostics.Hidden, res.Certificate)
		}
		e, err := metrics.CompareDepth2(net.MLP(), res.Model.MLP(), false)
		if err != nil {
			t.Fatal(err)
		}
		tol := 1e-9
		if c.f32 {
			tol = 1e-4
		}
		if e.MaxErr > tol || e.Missing+e.Extra > 0 {
			t.Fatalf("%+v: parameter error %.1e > %.0e (%+v)", c, e.MaxErr, tol, e)
		}
		t.Logf("%+v: parameter error %.1e, residual %.1e", c, e.MaxErr, res.Certificate.Residual)
	}
}

// With one output the centred outputs show one direction; the exact route
// does not apply and Fit goes on to the moments and the refinement.
func TestExactRouteNeedsOutputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	net := torchDefault(8, 3, 1, true, rng)
	X := testutil.RandDense(rng, 20000, 8)
	res, err := Fit(context.Background(), X, net.Forward(X), Options{Hidden: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Route == RouteSteinPolish || res.Diagnostics.Exact == "" {
		t.Fatalf("route %s, exact %q", res.Route, res.Diagnostics.Exact)
	}
}

func TestMillsInverse(t *testing.T) {
	for _, b := range []float64{-6, -2, -0.3, 0, 0.7, 3, 8} {
		r := hermite.NormCDF(b) / hermite.NormPDF(b)
		if got := millsInverse(r); math.Abs(got-b) > 1e-9 {
			t.Fatalf("millsInverse(Φ/φ(%g)) = %g", b, got)
		}
	}
}
