package twolayer

import (
	"context"
	"testing"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// BenchmarkFitScale is the scale target: d=100, k=20, m=50, n=2e5,
// noiseless, pure Go, target < 30 s on 2 cores. Main costs (flops): thin SVD
// of Y 2·n·m² = 1e9; order-2 moment 2·n·d²·3 = 1.2e10; residualising on 231
// quadratic features n·231² = 1.1e10; order-4 slices 2·n·k²·(4k+2k) ≈ 1.9e10
// over three passes; polish k·n·(d+k) = 5e8. Floor ≈ 4e10 flops ≈ 3 s at the
// ~13 GFLOP/s of pure-Go GEMM.
func BenchmarkFitScale(b *testing.B) {
	benchFit(b, synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 200000)
}

// BenchmarkFitSmall is the reliability instance: d=20, k=5, m=8, n=1e5.
func BenchmarkFitSmall(b *testing.B) {
	benchFit(b, synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100000)
}

func benchFit(b *testing.B, cfg synth.TwoLayerConfig, n int) {
	in := newInstance(b, 1, cfg, n, nil, synth.Noise{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Certificate.Met {
			b.Fatalf("not exact: %s", res.Reason)
		}
	}
}

// BenchmarkExactPolish measures Alg 5 alone at d=30, k=8, n=2e5 from a start
// 1e-2 away. Per unit: n·d for the cosines, an n log n sort, n·k for the
// activation and n·d for its certificate: ~1.5e7 flops + the sort.
func BenchmarkExactPolish(b *testing.B) {
	in := newInstance(b, 2, synth.TwoLayerConfig{D: 30, K: 8, M: 12, CondV: 3}, 200000, nil, synth.Noise{})
	B := basis(b, in.Y, 8)
	start := perturbRows(in.V, 1e-2, 3)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := ExactPolish(context.Background(), in.X, B, start, nn.ReLU, nil); err != nil {
			b.Fatal(err)
		}
	}
}
