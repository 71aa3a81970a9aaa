package outer

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Add agrees with gonum's Dgemm(Trans, NoTrans) for every remainder of the
// four-row and two-column unrolling, on strided views, and accumulates.
func TestAddMatchesGemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][3]int{{1, 1, 1}, {3, 2, 5}, {4, 3, 1}, {7, 5, 6}, {9, 4, 11}, {130, 17, 23}} {
		r, m, n := sz[0], sz[1], sz[2]
		a := blas64.General{Rows: r, Cols: m, Stride: m + 2, Data: make([]float64, r*(m+2))}
		b := blas64.General{Rows: r, Cols: n, Stride: n + 1, Data: make([]float64, r*(n+1))}
		for i := range a.Data {
			a.Data[i] = rng.NormFloat64()
		}
		for i := range b.Data {
			b.Data[i] = rng.NormFloat64()
		}
		c := make([]float64, m*n)
		for i := range c {
			c[i] = float64(i)
		}
		want := blas64.General{Rows: m, Cols: n, Stride: n, Data: append([]float64(nil), c...)}
		Add(c, a, b)
		blas64.Gemm(blas.Trans, blas.NoTrans, 1, a, b, 1, want)
		for i := range c {
			if math.Abs(c[i]-want.Data[i]) > 1e-12*(1+math.Abs(want.Data[i])) {
				t.Fatalf("r=%d m=%d n=%d: c[%d] = %v, want %v", r, m, n, i, c[i], want.Data[i])
			}
		}
	}
}

// BenchmarkAdd: one 4096-row chunk of the two-layer tensor start's first
// slice pass, 40 contraction weights against the 1 + 210 quadratic
// features of z ∈ R^20: 2·4096·40·211 = 6.9e7 flops.
func BenchmarkAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const r, m, n = 4096, 40, 211
	A := blas64.General{Rows: r, Cols: m, Stride: m, Data: make([]float64, r*m)}
	B := blas64.General{Rows: r, Cols: n, Stride: n, Data: make([]float64, r*n)}
	for i := range A.Data {
		A.Data[i] = rng.NormFloat64()
	}
	for i := range B.Data {
		B.Data[i] = rng.NormFloat64()
	}
	c := make([]float64, m*n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Add(c, A, B)
	}
}
