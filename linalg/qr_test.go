package linalg

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

func TestQRWhitening(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][2]int{{7, 7}, {50, 6}, {3000, 40}, {70000, 3}} {
		a := testutil.RandDense(rng, sz[0], sz[1])
		b := testutil.RandDense(rng, sz[0], 5)
		q, err := NewQR(a)
		if err != nil {
			t.Fatal(err)
		}
		r := q.R()
		// RᵀR = aᵀa.
		var rtr, ata mat.Dense
		rtr.Mul(r.T(), r)
		ata.Mul(a.T(), a)
		if e := testutil.RelDiff(&rtr, &ata); e > 1e-12 {
			t.Fatalf("%v: ‖RᵀR − aᵀa‖/‖aᵀa‖ = %g", sz, e)
		}
		for i := 0; i < sz[1]; i++ {
			for j := 0; j < i; j++ {
				if r.At(i, j) != 0 {
					t.Fatalf("%v: R[%d,%d] = %g below the diagonal", sz, i, j, r.At(i, j))
				}
			}
		}
		// Rᵀ(Qᵀb) = aᵀb.
		qtb, err := q.ApplyQT(b)
		if err != nil {
			t.Fatal(err)
		}
		var lhs, rhs mat.Dense
		lhs.Mul(r.T(), qtb)
		rhs.Mul(a.T(), b)
		if e := testutil.RelDiff(&lhs, &rhs); e > 1e-12 {
			t.Fatalf("%v: ‖Rᵀ·Qᵀb − aᵀb‖ relative %g", sz, e)
		}
		// ‖Qᵀb‖ ≤ ‖b‖ (orthonormal columns), equality when b ∈ col(a).
		var ax mat.Dense
		ax.Mul(a, testutil.RandDense(rng, sz[1], 2))
		qta, _ := q.ApplyQT(&ax)
		if d := math.Abs(mat.Norm(qta, 2) - mat.Norm(&ax, 2)); d > 1e-10*mat.Norm(&ax, 2) {
			t.Fatalf("%v: Qᵀ does not preserve the norm of a vector in col(a): off by %g", sz, d)
		}
	}
}

func TestQRBadInput(t *testing.T) {
	if _, err := NewQR(mat.NewDense(2, 3, nil)); !errors.Is(err, ErrShape) {
		t.Fatalf("wide: %v", err)
	}
	if _, err := NewQR(mat.NewDense(2, 1, []float64{1, math.NaN()})); !errors.Is(err, ErrNotFinite) {
		t.Fatalf("NaN: %v", err)
	}
	q, _ := NewQR(mat.NewDense(3, 1, []float64{1, 2, 3}))
	if _, err := q.ApplyQT(mat.NewDense(2, 1, nil)); !errors.Is(err, ErrShape) {
		t.Fatalf("rows: %v", err)
	}
}
