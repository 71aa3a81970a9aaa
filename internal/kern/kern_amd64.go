//go:build amd64 && !purego

package kern

import "golang.org/x/sys/cpu"

// useAVX2 reports a CPU and OS with AVX2 (CPUID, and the YMM state saved by
// the OS: golang.org/x/sys/cpu checks both).
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func pair4AVX2(ca, cb, b0, b1, b2, b3 *float64, n int, x *[8]float64)

//go:noescape
func rowTimesAVX2(out *float64, n int, x *float64, m int, b *float64, stride int)

//go:noescape
func gemm4AVX2(out *float64, ldo int, a *float64, lda int, b *float64, ldb int, m, n int)
