package kern

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randSlice(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64() * math.Exp(3*rng.NormFloat64())
	}
	return s
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// pair4Ref and rowTimesRef are the kernels' definitions written out
// independently of them: every product rounded before it is added, in the
// documented order.
func pair4Ref(ca, cb, b0, b1, b2, b3 []float64, x *[8]float64) {
	for j := range ca {
		ca[j] = ca[j] + (((float64(x[0]*b0[j]) + float64(x[1]*b1[j])) + float64(x[2]*b2[j])) + float64(x[3]*b3[j]))
		cb[j] = cb[j] + (((float64(x[4]*b0[j]) + float64(x[5]*b1[j])) + float64(x[6]*b2[j])) + float64(x[7]*b3[j]))
	}
}

func rowTimesRef(out, x, b []float64, stride int) {
	for j := range out {
		s := 0.0
		for i, xi := range x {
			s = s + float64(xi*b[i*stride+j])
		}
		out[j] = s
	}
}

// The kernels — AVX2 where the CPU has it, the Go loops always — give the
// bits of their definitions.
func TestKernelsMatchGo(t *testing.T) {
	if !useAVX2 {
		t.Log("no AVX2 here: the Go loops run")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 20, 31, 33, 211} {
		var x [8]float64
		copy(x[:], randSlice(rng, 8))
		b := [4][]float64{randSlice(rng, n+1), randSlice(rng, n+1), randSlice(rng, n+1), randSlice(rng, n+1)}
		ca, cb := randSlice(rng, n+1), randSlice(rng, n+1)
		wa, wb := append([]float64(nil), ca...), append([]float64(nil), cb...)
		ga, gb := append([]float64(nil), ca...), append([]float64(nil), cb...)
		Pair4(ca, cb, b[0], b[1], b[2], b[3], n, &x)
		pair4Go(ga[:n], gb[:n], b[0][:n], b[1][:n], b[2][:n], b[3][:n], &x)
		pair4Ref(wa[:n], wb[:n], b[0][:n], b[1][:n], b[2][:n], b[3][:n], &x)
		if !sameBits(ca, wa) || !sameBits(cb, wb) || !sameBits(ga, wa) || !sameBits(gb, wb) {
			t.Errorf("Pair4 n=%d (or its Go loop) differs from its definition", n)
		}
		for _, m := range []int{1, 2, 3, 5, 20, 231} {
			stride := n + 3
			B := randSlice(rng, m*stride)
			xs := randSlice(rng, m)
			got, goLoop, want := randSlice(rng, n), randSlice(rng, n), make([]float64, n)
			RowTimes(got, xs, B, stride)
			rowTimesGo(goLoop, xs, B, stride)
			rowTimesRef(want, xs, B, stride)
			if !sameBits(got, want) || !sameBits(goLoop, want) {
				t.Errorf("RowTimes n=%d m=%d (or its Go loop) differs from its definition", n, m)
			}
			for _, rows := range []int{1, 3, 4, 6, 9} {
				lda, ldo := m+2, n+1
				A := randSlice(rng, rows*lda)
				out := randSlice(rng, rows*ldo)
				want := append([]float64(nil), out...)
				MulRows(out, ldo, A, lda, B, stride, rows, m, n)
				for r := 0; r < rows; r++ {
					rowTimesRef(want[r*ldo:r*ldo+n], A[r*lda:r*lda+m], B, stride)
				}
				if !sameBits(out, want) {
					t.Errorf("MulRows rows=%d n=%d m=%d differs from the Go loop", rows, n, m)
				}
			}
		}
	}
}

func BenchmarkPair4(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 211
	var x [8]float64
	r := [4][]float64{randSlice(rng, n), randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)}
	ca, cb := make([]float64, n), make([]float64, n)
	for b.Loop() {
		Pair4(ca, cb, r[0], r[1], r[2], r[3], n, &x)
	}
}

func BenchmarkPair4Go(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 211
	var x [8]float64
	r := [4][]float64{randSlice(rng, n), randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)}
	ca, cb := make([]float64, n), make([]float64, n)
	for b.Loop() {
		pair4Go(ca, cb, r[0], r[1], r[2], r[3], &x)
	}
}

func BenchmarkMulRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, m, n = 64, 231, 20
	A, B, out := randSlice(rng, rows*m), randSlice(rng, m*n), make([]float64, rows*n)
	for b.Loop() {
		MulRows(out, n, A, m, B, n, rows, m, n)
	}
}

func BenchmarkMulRowsGo(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, m, n = 64, 231, 20
	A, B, out := randSlice(rng, rows*m), randSlice(rng, m*n), make([]float64, rows*n)
	for b.Loop() {
		for r := 0; r < rows; r++ {
			rowTimesGo(out[r*n:(r+1)*n], A[r*m:(r+1)*m], B, n)
		}
	}
}
