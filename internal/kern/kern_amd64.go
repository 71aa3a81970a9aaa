//go:build amd64 && !purego

package kern

// useAVX2 reports a CPU and OS with AVX2 (CPUID and the saved YMM state).
var useAVX2 = hasAVX2()

func hasAVX2() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false
	}
	if eax, _ := xgetbv(); eax&6 != 6 { // XMM and YMM state saved by the OS
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

//go:noescape
func pair4AVX2(ca, cb, b0, b1, b2, b3 *float64, n int, x *[8]float64)

//go:noescape
func rowTimesAVX2(out *float64, n int, x *float64, m int, b *float64, stride int)

//go:noescape
func gemm4AVX2(out *float64, ldo int, a *float64, lda int, b *float64, ldb int, m, n int)
