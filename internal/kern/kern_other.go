//go:build !amd64 || purego

package kern

const useAVX2 = false

func pair4AVX2(ca, cb, b0, b1, b2, b3 *float64, n int, x *[8]float64) { panic("kern: no AVX2") }

func rowTimesAVX2(out *float64, n int, x *float64, m int, b *float64, stride int) {
	panic("kern: no AVX2")
}

func gemm4AVX2(out *float64, ldo int, a *float64, lda int, b *float64, ldb int, m, n int) {
	panic("kern: no AVX2")
}
