package robust

import (
	"testing"
)

// The timing target at the reference size of docs/robust.md: d = 20000,
// k = 50, 5% outliers of magnitude 50, one solve under 0.1 s (scikit-learn's
// HuberRegressor: ~0.09 s; see bench/huber_vs_sklearn.py).
//
// Work floor of one SSN solve: the Gram matrix AᵀA, d·k² = 5e7 multiply-adds
// (once per A); the OLS start and each Newton iteration, two matrix–vector
// products 2·d·k = 2e6 plus the outlier downdate |O|·k² ≈ 2.5e6 and a k³/3
// Cholesky; 2–4 iterations. Bytes: A is 8 MB and is streamed ~2 times per
// iteration. So ≈ 6e7 flops + ~50 MB of traffic: ~10 ms at pure-Go speeds.
func BenchmarkRecoverD20000(b *testing.B) {
	in, v, _ := instance(b, 11, 20000, 50, 1000, 50)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Recover(in.A, v, Options{Tau: 2})
		if err != nil || !r.Certificate.Met {
			b.Fatal(err, r.Certificate)
		}
	}
}

// BenchmarkSolveD20000 is the same solve with AᵀA already computed
// (NewSolver once, as RecoverAll does for many observations).
func BenchmarkSolveD20000(b *testing.B) {
	in, v, _ := instance(b, 11, 20000, 50, 1000, 50)
	s, err := NewSolver(in.A, Options{Tau: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Solve(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecoverMADD20000 adds the data-driven MAD threshold (two extra
// Huber fits for the scale).
func BenchmarkRecoverMADD20000(b *testing.B) {
	in, v, _ := instance(b, 11, 20000, 50, 1000, 50)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Recover(in.A, v, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
