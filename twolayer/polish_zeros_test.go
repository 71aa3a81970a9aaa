package twolayer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The polish's first pass keeps, per unit and sign, the samples with the
// smallest sign·cosine; they must be exactly the first t of a full sort by
// (key, index), within the kept capacity and beyond it (the fallback pass),
// ties included.
func TestConfidentZerosMatchFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n, d, k := 3000, 6, 3
	X := mat.NewDense(n, d, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			// Few distinct values: many exact ties among the cosines.
			X.Set(i, j, float64(rng.IntN(5)-2))
		}
		X.Set(i, 0, X.At(i, 0)+0.5)
	}
	V := mat.NewDense(k, d, nil)
	for i := range V.RawMatrix().Data {
		V.RawMatrix().Data[i] = rng.NormFloat64()
	}
	xnorm := make([]float64, n)
	capacity := 40
	zs := confidentZeros(X, V, xnorm, capacity, false)
	for q := range xnorm {
		if want := math.Max(mat.Norm(X.RowView(q), 2), math.SmallestNonzeroFloat64); math.Abs(xnorm[q]-want) > 1e-15*want {
			t.Fatalf("row %d: norm %v, want mat.Norm's %v", q, xnorm[q], want)
		}
	}
	for i := 0; i < k; i++ {
		for _, sign := range []int{1, -1} {
			all := make([]keyed, n)
			for q := range all {
				all[q] = keyed{float64(sign) * (dot(X.RawRowView(q), V.RawRowView(i)) / xnorm[q]), q}
			}
			slices.SortFunc(all, keyedLess)
			for _, tt := range []int{1, 17, capacity, capacity + 1, 3 * capacity} {
				got := zs.zeros(X, V, xnorm, i, sign, tt)
				for j, q := range got {
					if q != all[j].q {
						t.Fatalf("unit %d sign %+d t %d: position %d is sample %d, want %d", i, sign, tt, j, q, all[j].q)
					}
				}
				if len(got) != tt {
					t.Fatalf("unit %d sign %+d: %d zeros, want %d", i, sign, len(got), tt)
				}
			}
		}
	}
}
