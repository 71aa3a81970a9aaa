package tensor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// benchMoments times HermiteMoments of orders 0…R in k dimensions for one
// weight channel and reports samples per second.
//
// Flop floor (the GEMM, which dominates): 2·F_L·F_R flops per sample with
// F_L = C(k+⌈R/2⌉, k) and F_R = C(k+⌊R/2⌋, k): R = 4 gives 2·21·21 = 882 at
// k = 5 and 2·66·66 = 8 712 at k = 10; R = 6, k = 4 gives 2·35·35 = 2 450.
// Feature construction adds F_L + F_R multiplications and (R/2+1)·k
// recurrence steps per sample. Bytes: one pass over Z (8·k per sample) and
// the weights (8 per sample), so memory traffic is negligible against the
// flops; at pure-Go gonum GEMM speed (~8 GFLOP/s per core) the floor is
// ≈ 9·10⁶ samples/s per core at k = 5, R = 4.
func benchMoments(b *testing.B, n, k, R int) {
	rng := rand.New(rand.NewPCG(1, 1))
	Z := mat.NewDense(n, k, nil)
	S := mat.NewDense(n, 1, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			Z.Set(i, j, rng.NormFloat64())
		}
		S.Set(i, 0, rng.NormFloat64())
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := HermiteMoments(context.Background(), Z, S, R, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}

func BenchmarkHermiteMoments(b *testing.B) {
	for _, c := range []struct{ k, R int }{{5, 4}, {10, 4}, {4, 6}} {
		b.Run(fmt.Sprintf("k=%d/order=%d", c.k, c.R), func(b *testing.B) { benchMoments(b, 1_000_000, c.k, c.R) })
	}
}
