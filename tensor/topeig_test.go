package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// topEigen agrees with the full symmetric eigendecomposition on the largest
// eigenpair: random matrices of sizes 1…30, definite and indefinite, a
// diagonal one and one with a tiny gap below the top.
func TestTopEigenMatchesEigenSym(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ws eigWork
	check := func(name string, Q *mat.SymDense, wantVec bool) {
		t.Helper()
		k := Q.SymmetricDim()
		var eig mat.EigenSym
		if !eig.Factorize(Q, true) {
			t.Fatalf("%s: EigenSym failed", name)
		}
		vals := eig.Values(nil)
		var vecs mat.Dense
		eig.VectorsTo(&vecs)
		lam, v, ok := topEigen(Q, &ws)
		if !ok {
			t.Fatalf("%s: not ok", name)
		}
		scale := math.Max(math.Abs(vals[0]), math.Abs(vals[k-1]))
		if math.Abs(lam-vals[k-1]) > 1e-13*scale {
			t.Fatalf("%s: λ = %v, want %v", name, lam, vals[k-1])
		}
		// Residual ‖Qv − λv‖ at rounding level, and the same vector when
		// the top eigenvalue is separated.
		var qv mat.VecDense
		qv.MulVec(Q, mat.NewVecDense(k, v))
		res := 0.0
		for i := range v {
			res = math.Max(res, math.Abs(qv.AtVec(i)-lam*v[i]))
		}
		if res > 1e-12*scale {
			t.Fatalf("%s: residual %.1e (scale %.1e)", name, res, scale)
		}
		if wantVec {
			c := math.Abs(mat.Dot(mat.NewVecDense(k, v), vecs.ColView(k-1)))
			if c < 1-1e-10 {
				t.Fatalf("%s: |cos| with EigenSym's vector %v", name, c)
			}
		}
	}
	for k := 1; k <= 30; k++ {
		for trial := 0; trial < 5; trial++ {
			Q := mat.NewSymDense(k, nil)
			for i := 0; i < k; i++ {
				for j := i; j < k; j++ {
					Q.SetSym(i, j, rng.NormFloat64())
				}
			}
			check("random", Q, true)
		}
	}
	D := mat.NewSymDense(6, nil)
	for i := 0; i < 6; i++ {
		D.SetSym(i, i, float64(i%3)-1)
	}
	D.SetSym(5, 5, 4)
	check("diagonal", D, true)
	// Two top eigenvalues 1e-9 apart: the vector is some unit vector of the
	// (nearly) two-dimensional top space; the residual must still be small.
	A := mat.NewDense(8, 8, nil)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	var qr mat.QR
	qr.Factorize(A)
	var O mat.Dense
	qr.QTo(&O)
	lams := []float64{-3, -1, 0, 0.5, 1, 2, 5, 5 + 1e-9}
	C := mat.NewSymDense(8, nil)
	for i := 0; i < 8; i++ {
		for j := i; j < 8; j++ {
			s := 0.0
			for l := 0; l < 8; l++ {
				s += O.At(i, l) * lams[l] * O.At(j, l)
			}
			C.SetSym(i, j, s)
		}
	}
	check("cluster", C, false)
}
