package certify

import (
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
)

// CheckMatrix is the shape check of one matrix argument at a library
// boundary: A must be present, non-empty, have rows rows and cols columns
// (a negative count accepts any) and only finite entries. fn names the
// function (e.g. "twolayer.SolveU"), name the argument and want the
// expected shape in words (e.g. "k×d with d = X's columns"); the error wraps
// errs.ErrInput and says what was expected. It returns A's dimensions.
func CheckMatrix(fn, name string, A *mat.Dense, rows, cols int, want string) (r, c int, err error) {
	if A == nil {
		return 0, 0, errs.Inputf("%s: %s is nil; expected %s", fn, name, want)
	}
	if A.IsEmpty() {
		return 0, 0, errs.Inputf("%s: %s is empty; expected %s", fn, name, want)
	}
	r, c = A.Dims()
	if r == 0 || c == 0 {
		return 0, 0, errs.Inputf("%s: %s is empty (%d×%d); expected %s", fn, name, r, c, want)
	}
	if rows >= 0 && r != rows {
		return 0, 0, errs.Inputf("%s: %s has %d rows but needs %d; expected %s to be %s", fn, name, r, rows, name, want)
	}
	if cols >= 0 && c != cols {
		return 0, 0, errs.Inputf("%s: %s has %d columns but needs %d; expected %s to be %s", fn, name, c, cols, name, want)
	}
	if err := dataio.CheckFinite(name, A); err != nil {
		return 0, 0, errs.Inputf("%s: %v", fn, err)
	}
	return r, c, nil
}
