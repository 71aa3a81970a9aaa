package twolayer

import (
	"context"
	"testing"

	"github.com/relurec/relurec/synth"
)

// BenchmarkFitScale is the scale target: d=100, k=20, m=50, n=2e5,
// noiseless, pure Go, target < 30 s on 2 cores (0.72 s single-threaded,
// 2026-11-26). Main costs (flops): thin SVD of Y 2·n·m² = 1e9; the parity
// start's linear part (d+k)²·4·10⁴ ≈ 6e8 and its equations' Gram
// (k(k+1)/2)²·2·10⁴ ≈ 9e8; the polish and U: three products n·d·k (2.4e9
// with the multiply-adds counted twice) and the residual 2·n·k·m = 4e8.
// The route screens (ICA on 10⁴ rows, collinear classes) do not run: the
// exact route from the parity start is tried first and certifies. The
// paper's tensor start (Options.Start = "tensor") costs ≈ 2e10 more:
// order-2 moment, residualisation, three order-4 slice passes.
func BenchmarkFitScale(b *testing.B) {
	benchFit(b, synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 200000, Options{Seed: 1})
}

// BenchmarkFitScaleTensorStart is BenchmarkFitScale with the paper's tensor
// start only (2.7 s a fit single-threaded, 2026-11-26).
func BenchmarkFitScaleTensorStart(b *testing.B) {
	benchFit(b, synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 200000, Options{Seed: 1, Start: StartTensor})
}

// BenchmarkFitSmall is the reliability instance: d=20, k=5, m=8, n=1e5.
func BenchmarkFitSmall(b *testing.B) {
	benchFit(b, synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100000, Options{Seed: 1})
}

func benchFit(b *testing.B, cfg synth.TwoLayerConfig, n int, opt Options) {
	in := newInstance(b, 1, cfg, n, nil, synth.Noise{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Fit(context.Background(), in.X, in.Y, opt)
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
		if _, _, err := ExactPolish(context.Background(), in.X, B, start, PolishOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
