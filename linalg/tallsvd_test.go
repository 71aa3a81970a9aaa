package linalg

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/blasbackend"
)

// TallSVD, the values-only SVD (Cond) and LstSq's lean QR give the bits of
// the stored TSQR: the leaves' Geqrf is deterministic and Q acts on each
// column on its own.
func TestTallSVDMatchesThinSVDBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][2]int{{100000, 20}, {30, 20}, {50, 7}, {300001, 13}, {7000, 5}} {
		r, c := sz[0], sz[1]
		a := mat.NewDense(r, c, nil)
		for i := range a.RawMatrix().Data {
			a.RawMatrix().Data[i] = rng.NormFloat64()
		}
		u, s, v, err := ThinSVD(a)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := NewTallSVD(a)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s {
			if s[i] != ts.S[i] {
				t.Fatalf("%v: s[%d] %v != %v", sz, i, ts.S[i], s[i])
			}
		}
		if !mat.Equal(v, ts.V) {
			t.Fatalf("%v: V differs", sz)
		}
		for _, q := range []int{1, c / 2, c} {
			if q < 1 {
				continue
			}
			uq := ts.UCols(q)
			// A native BLAS (the openblas tag) may block a product with q
			// columns differently from one with c: equal up to rounding there.
			if same := mat.Equal(uq, u.Slice(0, r, 0, q)); !same && (!blasbackend.Native() || !mat.EqualApprox(uq, u.Slice(0, r, 0, q), 1e-13)) {
				t.Fatalf("%v: U[:, :%d] differs", sz, q)
			}
			// UColsTo into a buffer that holds another matrix's entries:
			// the same bits, in the buffer's memory.
			buf := make([]float64, r*q+3)
			for i := range buf {
				buf[i] = rng.NormFloat64()
			}
			if ut := ts.UColsTo(buf, q); !mat.Equal(ut, uq) || &ut.RawMatrix().Data[0] != &buf[0] {
				t.Fatalf("%v: UColsTo(buf, %d) differs from UCols or does not use buf", sz, q)
			}
			if ut := ts.UColsTo(buf[:r*q-1], q); !mat.Equal(ut, uq) {
				t.Fatalf("%v: UColsTo(short buf, %d) differs from UCols", sz, q)
			}
		}
		if r < 2*c {
			continue
		}
		// Cond and LstSq against the stored factorization.
		qr := newTallQR(a.RawMatrix())
		_, s2, _, _ := gonumSVD(mat.NewDense(c, c, qr.r().Data), false)
		_, s3, _, _ := thinSVD(a, false)
		for i := range s2 {
			if s2[i] != s3[i] {
				t.Fatalf("%v: values-only s[%d] differ", sz, i)
			}
		}
		b := mat.NewDense(r, 3, nil)
		for i := range b.RawMatrix().Data {
			b.RawMatrix().Data[i] = rng.NormFloat64()
		}
		y1 := qr.applyQT(b.RawMatrix())
		y2 := newLeanQR(a.RawMatrix()).applyQT(b.RawMatrix())
		for i := range y1.Data {
			if y1.Data[i] != y2.Data[i] {
				t.Fatalf("%v: applyQT differs at %d", sz, i)
			}
		}
	}
}
