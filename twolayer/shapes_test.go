package twolayer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// expectInputError runs call and fails unless it returns an error wrapping
// ErrInput whose message contains want — in particular if it panics.
func expectInputError(t *testing.T, name, want string, call func() error) {
	t.Helper()
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s panicked: %v", name, p)
				err = ErrInput
			}
		}()
		err = call()
	}()
	if !errors.Is(err, ErrInput) {
		t.Errorf("%s: got %v, want an error wrapping ErrInput", name, err)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: message %q does not say %q", name, err, want)
	}
}

func shapeFixture(n, d, k, m int) (X, Y, V, U *mat.Dense) {
	fill := func(r, c int, s float64) *mat.Dense {
		a := mat.NewDense(r, c, nil)
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				a.Set(i, j, s*float64((i*7+j*3)%11-5))
			}
		}
		return a
	}
	return fill(n, d, 0.3), fill(n, m, 0.2), fill(k, d, 0.5), fill(m, k, 0.7)
}

// TestBoundaryShapesAreErrors: SolveU, Refine, RecoverSigns and ExactPolish
// refuse nil and mismatched arguments with an ErrInput error naming the
// argument and the expected shape, instead of panicking or silently using
// the wrong columns.
func TestBoundaryShapesAreErrors(t *testing.T) {
	ctx := context.Background()
	X, Y, V, U := shapeFixture(40, 5, 3, 2)
	_, _, Vwide, _ := shapeFixture(40, 6, 3, 2)
	_, Yshort, _, _ := shapeFixture(39, 5, 3, 2)
	Xwide, _, _, _ := shapeFixture(40, 7, 3, 2)
	Uwide := mat.NewDense(2, 4, nil)
	Utall := mat.NewDense(3, 3, nil)

	solve := func(X, Y, V *mat.Dense) func() error {
		return func() error { _, _, err := SolveU(X, Y, V, ""); return err }
	}
	expectInputError(t, "SolveU nil V", "twolayer.SolveU: V is nil; expected k×d with d = 5", solve(X, Y, nil))
	expectInputError(t, "SolveU nil X", "twolayer.SolveU", solve(nil, Y, V))
	expectInputError(t, "SolveU V cols", "twolayer.SolveU: V has 6 columns but needs 5", solve(X, Y, Vwide))
	expectInputError(t, "SolveU Y rows", "rows", solve(X, Yshort, V))
	expectInputError(t, "SolveU empty V", "V is empty", solve(X, Y, &mat.Dense{}))

	refine := func(X, Y, V, U *mat.Dense) func() error {
		return func() error { _, err := Refine(ctx, X, Y, V, U, "", 5, nil); return err }
	}
	expectInputError(t, "Refine nil U0", "twolayer.Refine: U0 is nil; expected m×k with m = 2 (Y's columns) and k = 3", refine(X, Y, V, nil))
	expectInputError(t, "Refine nil V0", "twolayer.Refine: V0 is nil", refine(X, Y, nil, U))
	expectInputError(t, "Refine V0 cols", "V0 has 6 columns but needs 5", refine(X, Y, Vwide, U))
	expectInputError(t, "Refine X wider than V0", "V0 has 5 columns but needs 7", refine(Xwide, Y, V, U))
	expectInputError(t, "Refine V0 rows ≠ U0 cols", "U0 has 4 columns but needs 3", refine(X, Y, V, Uwide))
	expectInputError(t, "Refine U0 rows", "U0 has 3 rows but needs 2", refine(X, Y, V, Utall))
	expectInputError(t, "Refine Y rows", "rows", refine(X, Yshort, V, U))
	expectInputError(t, "Refine Y zero", "identically zero", refine(X, mat.NewDense(40, 2, nil), V, U))

	signs := func(X, Y, V *mat.Dense) func() error {
		return func() error { _, _, err := RecoverSigns(ctx, X, Y, V, ""); return err }
	}
	expectInputError(t, "RecoverSigns X wider than Vhat", "twolayer.RecoverSigns: Vhat has 5 columns but needs 7", signs(Xwide, Y, V))
	expectInputError(t, "RecoverSigns Vhat wider than X", "Vhat has 6 columns but needs 5", signs(X, Y, Vwide))
	expectInputError(t, "RecoverSigns nil Y", "twolayer.RecoverSigns", signs(X, nil, V))
	expectInputError(t, "RecoverSigns Y rows", "rows", signs(X, Yshort, V))

	polish := func(X, B, V *mat.Dense) func() error {
		return func() error { _, _, err := ExactPolish(ctx, X, B, V, PolishOptions{}); return err }
	}
	B := mat.NewDense(40, 3, nil)
	expectInputError(t, "ExactPolish nil X", "twolayer.ExactPolish: X is nil", polish(nil, B, V))
	expectInputError(t, "ExactPolish nil B", "twolayer.ExactPolish: B is nil", polish(X, nil, V))
	expectInputError(t, "ExactPolish nil Vhat", "twolayer.ExactPolish: Vhat is nil", polish(X, B, nil))
	expectInputError(t, "ExactPolish Vhat cols", "Vhat has 6 columns but needs 5", polish(X, B, Vwide))
}
