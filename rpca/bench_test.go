package rpca

import (
	"context"
	"testing"
)

// BenchmarkPCP is the sparse-noise route's size: n = 10000 samples, m = 200
// outputs, rank 3, 5% corruptions. Floor per iteration: the Gram product
// n·m² = 4e8 flops (Dsyrk, half of that in multiply-adds) plus a 200×200
// eigensolve and 4·n·m·r = 2.4e7 flops for the thresholded product; ~20
// iterations reach 1e-9, then the debias sweeps cost ~4·n·m·r·(r+1) = 1e8
// flops each.
func BenchmarkPCP(b *testing.B) {
	_, A, _ := lowRankPlusSparse(b, 10000, 200, 3, 0.05, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := PCP(context.Background(), A, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
