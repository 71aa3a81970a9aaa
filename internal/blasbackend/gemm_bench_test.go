package blasbackend_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/relurec/relurec/internal/blasbackend"
)

// BenchmarkDgemm measures C = A·B for square n×n float64 matrices through
// blas64, i.e. through whichever backend this binary was built with, and
// reports GFLOP/s. Compare
//
//	GOMAXPROCS=1 go test -run '^$' -bench Dgemm ./internal/blasbackend
//	OPENBLAS_NUM_THREADS=1 GOMAXPROCS=1 CGO_ENABLED=1 go test -tags openblas -run '^$' -bench Dgemm ./internal/blasbackend
//
// (or scripts/openblas.sh bench). Work: 2n³ flops per product (33.6 MFLOP at
// n = 256, 2.15 GFLOP at n = 1024) over 3·8n² bytes of operands (1.5 MiB,
// 24 MiB): n/12 flops per byte, so both sizes are compute-bound and the floor
// is 2n³ over the cores' peak FMA rate, not memory bandwidth.
func BenchmarkDgemm(b *testing.B) {
	for _, n := range []int{256, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			mk := func() blas64.General {
				g := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
				for i := range g.Data {
					g.Data[i] = rng.NormFloat64()
				}
				return g
			}
			a, bm, c := mk(), mk(), mk()
			b.ResetTimer()
			for b.Loop() {
				blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, bm, 0, c)
			}
			b.StopTimer()
			flops := 2 * float64(n) * float64(n) * float64(n) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.Logf("backend %s", blasbackend.Name())
		})
	}
}
