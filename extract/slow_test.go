//go:build slow

package extract

import (
	"context"
	"math"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// torchInit draws nn.Sequential(Linear(d, m), ReLU, Linear(m, p)) with
// PyTorch's default initialisation: weights and biases U(−1/√fan_in,
// 1/√fan_in).
func torchInit(d, m, p int, seed uint64) *nn.MLP {
	rng := synth.NewRand(seed)
	u := func(r, c, fan int) (*mat.Dense, []float64) {
		s := 1 / math.Sqrt(float64(fan))
		W := mat.NewDense(r, c, nil)
		for i := range W.RawMatrix().Data {
			W.RawMatrix().Data[i] = s * (2*rng.Float64() - 1)
		}
		b := make([]float64, r)
		for i := range b {
			b[i] = s * (2*rng.Float64() - 1)
		}
		return W, b
	}
	W, b := u(m, d, d)
	A, c := u(p, m, m)
	return &nn.MLP{Layers: []nn.Layer{{Weight: W, Bias: b, Act: nn.ReLU}, {Weight: A, Bias: c, Act: nn.Identity}}}
}

// TestSlowTorchSized measures extraction at MNIST sizes: 784-64-10 (the
// issue's acceptance size) and 784-128-1 (Carlini et al. 2020's
// benchmark, ~2^21.5 queries there).
func TestSlowTorchSized(t *testing.T) {
	for _, c := range []struct{ d, m, p int }{{784, 64, 10}, {784, 128, 1}} {
		for seed := uint64(1); seed <= 3; seed++ {
			net := torchInit(c.d, c.m, c.p, seed)
			start := time.Now()
			res, err := Extract(context.Background(), FromMLP(net), c.d, Options{Seed: seed, PolishTol: slowPolish})
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			cmp, err := metrics.CompareDepth2(net, res.Model.MLP(), false)
			if err != nil {
				t.Fatal(err)
			}
			dg := res.Diagnostics
			t.Logf("%d-%d-%d seed %d: units %d, lines %d, kinks %d, queries %d = 2^%.2f (search %d, Jacobians %d in %d measurements, %d retried, certificate %d), %d calls, %.1f s, residual %.1e, max parameter error %.1e (W %.1e, b %.1e, A %.1e, c %.1e), warnings %v",
				c.d, c.m, c.p, seed, res.Units, res.Lines, res.Kinks, res.Queries, math.Log2(float64(res.Queries)), dg.QueriesSearch, dg.QueriesJacobian, dg.Jacobians, dg.JacobianRetries, dg.QueriesCert, res.Calls, el.Seconds(), res.Certificate.Residual, cmp.MaxErr, cmp.MaxErrW, cmp.MaxErrB, cmp.MaxErrA, cmp.MaxErrC, res.Warnings)
			if res.Units != c.m || cmp.MaxErr > 1e-8 || !res.Certificate.Met {
				t.Errorf("units %d/%d, max error %.2e, certificate %+v", res.Units, c.m, cmp.MaxErr, res.Certificate)
			}
		}
	}
}

var slowPolish = 0.0
