package linalg

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkCholeskyInPlace factors a p×p positive definite matrix, the
// zero-set start's per-step Gram (p = k hidden units).
func BenchmarkCholeskyInPlace(b *testing.B) {
	for _, p := range []int{100, 200} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			g := make([]float64, p*p)
			for i := range p {
				for j := 0; j <= i; j++ {
					v := rng.NormFloat64() / float64(p)
					g[i*p+j], g[j*p+i] = v, v
				}
				g[i*p+i] += 2
			}
			a := make([]float64, p*p)
			for b.Loop() {
				copy(a, g)
				if !CholeskyInPlace(a, p) {
					b.Fatal("not positive definite")
				}
			}
		})
	}
}
