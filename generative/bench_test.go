package generative

import (
	"context"
	"testing"

	"github.com/relurec/relurec/density"
)

// BenchmarkALSAcceptance is the reference instance of docs/generative.md
// (d=100, k=3, n=800, N(0,1) bias). Per sweep: the neuron step forms d Gram
// matrices of size (k+1)² over its active observations (≤ n·d·(k+1)² ≈ 1.3e6
// multiply-adds) and the observation step n of size k² (≤ 7e5), each usually
// once or twice (active-set Newton); about 40 sweeps: ≈ 1e8 flops, pure Go
// loops.
func BenchmarkALSAcceptance(b *testing.B) {
	in := gen(b, 1, 100, 3, 800, density.Gaussian{Mean: 0, Std: 1})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FitALS(context.Background(), in.Y, Options{Rank: 3}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkADMMSmall is Solver A at d=40, k=2, n=150: each iteration is a
// row step (d bisections of 100 evaluations of O(n)) and a warm-started
// rank-k projection (two power steps, 4·d·n·k flops), ~10³ iterations.
func BenchmarkADMMSmall(b *testing.B) {
	bias := density.Gaussian{Mean: 0.5, Std: 1}
	in := gen(b, 7, 40, 2, 150, bias)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FitADMM(context.Background(), in.Y, Options{Rank: 2, Bias: bias}); err != nil {
			b.Fatal(err)
		}
	}
}
