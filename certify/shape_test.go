package certify

import (
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
)

func TestCheckMatrix(t *testing.T) {
	V := mat.NewDense(3, 6, nil)
	if r, c, err := CheckMatrix("pkg.F", "V", V, 3, -1, "k×d"); err != nil || r != 3 || c != 6 {
		t.Fatalf("valid V: %d×%d, %v", r, c, err)
	}
	bad := mat.NewDense(2, 2, []float64{0, math.NaN(), 0, 0})
	for _, tc := range []struct {
		A          *mat.Dense
		rows, cols int
		want       string
	}{
		{nil, -1, -1, "pkg.F: V is nil; expected k×d with d = 5"},
		{&mat.Dense{}, -1, -1, "pkg.F: V is empty"},
		{V, -1, 5, "pkg.F: V has 6 columns but needs 5; expected V to be k×d with d = 5"},
		{V, 4, -1, "pkg.F: V has 3 rows but needs 4"},
		{bad, -1, -1, "pkg.F: "},
	} {
		_, _, err := CheckMatrix("pkg.F", "V", tc.A, tc.rows, tc.cols, "k×d with d = 5")
		if !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want ErrInput containing %q", err, tc.want)
		}
	}
}
