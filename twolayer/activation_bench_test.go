package twolayer

import (
	"context"
	"testing"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// BenchmarkFitActivation is the exact route for φ = x² at d=20, k=5, m=8,
// n=1e5 (noiseless). Order 3 instead of the ReLU's 4 makes the slice passes
// cheaper (2·n·k²·(2k+3) flops per pass, no quadratic residualisation:
// degree 1 instead of 2); the polish adds the second pass on the exact zero
// pattern (≤ 20 000·k² flops per unit) and φ⁻¹ on ≤ 200 rows. Floor ≈ that
// of BenchmarkFitSmall.
func BenchmarkFitActivation(b *testing.B) {
	benchFitAct(b, nn.RectPow(2))
}

// BenchmarkFitActivationExp is the same for φ = e^x − 1 with row norms in
// [0.6, 1.4]: the polish adds the scale search (≈ 49 grid points + a few
// Gauss–Newton steps on ≤ 200×d, negligible) per unit.
func BenchmarkFitActivationExp(b *testing.B) {
	benchFitAct(b, nn.RectExp)
}

func benchFitAct(b *testing.B, act nn.Activation) {
	in := newActInstance(b, 1, synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100000, act, act == nn.RectExp, synth.Noise{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: 1, Activation: act})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Certificate.Met {
			b.Fatalf("not exact: %s", res.Reason)
		}
	}
}
