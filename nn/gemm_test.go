package nn

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestMulMatchesDefinition checks mul against the sum that defines the
// product for every combination of transposed operands, with shapes that
// leave rows over after the kernel's blocks of four and an empty inner
// dimension (a zero product).
func TestMulMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][3]int{{1, 1, 1}, {3, 5, 2}, {7, 4, 9}, {17, 16, 17}, {10, 0, 3}} {
		m, k, n := s[0], s[1], s[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				a, b := make([]float64, m*k), make([]float64, k*n)
				for i := range a {
					a[i] = rng.NormFloat64()
				}
				for i := range b {
					b[i] = rng.NormFloat64()
				}
				opA := func(i, l int) float64 { // op(a)[i][l]
					if ta {
						return a[l*m+i]
					}
					return a[i*k+l]
				}
				opB := func(l, j int) float64 {
					if tb {
						return b[j*k+l]
					}
					return b[l*n+j]
				}
				c := make([]float64, m*n)
				for i := range c {
					c[i] = 99 // overwritten, not added to
				}
				mul(c, a, ta, b, tb, m, k, n)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						w := 0.0
						for l := 0; l < k; l++ {
							w += opA(i, l) * opB(l, j)
						}
						if d := c[i*n+j] - w; d > 1e-12 || d < -1e-12 {
							t.Fatalf("%d×%d×%d ta=%v tb=%v: c[%d,%d] = %v, want %v", m, k, n, ta, tb, i, j, c[i*n+j], w)
						}
					}
				}
			}
		}
	}
}

// BenchmarkMul times the products of a transformer block's backward pass
// (16 samples × 17 tokens by 64×64: ∂a = ∂y·bᵀ and ∂b = aᵀ·∂y) with mul
// and with gonum's Mul, one after the other:
// GOMAXPROCS=1 go test -run '^$' -bench 'Mul' ./nn
func BenchmarkMul(b *testing.B) {
	const rows, k, n = 272, 64, 64
	a, w, gy := make([]float64, rows*k), make([]float64, k*n), make([]float64, rows*n)
	for i := range a {
		a[i] = float64(i%13) - 6
	}
	for i := range w {
		w[i] = float64(i%7) - 3
	}
	for i := range gy {
		gy[i] = float64(i%5) - 2
	}
	ga, gw := make([]float64, rows*k), make([]float64, k*n)
	b.Run("kern", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			mul(ga, gy, false, w, true, rows, n, k)
			mul(gw, a, true, gy, false, k, rows, n)
		}
	})
	b.Run("gonum", func(b *testing.B) {
		am, wm, gm := mat.NewDense(rows, k, a), mat.NewDense(k, n, w), mat.NewDense(rows, n, gy)
		gam, gwm := mat.NewDense(rows, k, ga), mat.NewDense(k, n, gw)
		for i := 0; i < b.N; i++ {
			gam.Mul(gm, wm.T())
			gwm.Mul(am.T(), gm)
		}
	})
}
