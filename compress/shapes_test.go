package compress

import (
	"errors"
	"math"
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

func shapeMat(r, c int) *mat.Dense {
	a := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			a.Set(i, j, float64((i*7+j*3)%11-5)+0.1*float64(i))
		}
	}
	return a
}

// TestBoundaryShapesAreErrors: Thm31Core, NewSubspace, ProjNuc, ProjectPsi
// and ReLUMLE refuse nil and mismatched matrices with an ErrInput error
// naming the argument and the expected shape instead of panicking.
func TestBoundaryShapesAreErrors(t *testing.T) {
	xc, m, yt := shapeMat(10, 3), shapeMat(3, 4), shapeMat(10, 4)
	if _, err := Thm31Core(2, xc, yt, m); err != nil {
		t.Fatalf("Thm31Core on matching shapes: %v", err)
	}
	core := func(r int, xc, yt, m *mat.Dense) func() error {
		return func() error { _, err := Thm31Core(r, xc, yt, m); return err }
	}
	expectInputError(t, "Thm31Core nil xc", "compress.Thm31Core: xc is nil", core(2, nil, yt, m))
	expectInputError(t, "Thm31Core nil m", "compress.Thm31Core: m is nil", core(2, xc, yt, nil))
	expectInputError(t, "Thm31Core nil yt", "compress.Thm31Core: yt is nil", core(2, xc, nil, m))
	expectInputError(t, "Thm31Core m rows", "m has 4 rows but needs 3", core(2, xc, yt, shapeMat(4, 4)))
	expectInputError(t, "Thm31Core yt rows", "yt has 9 rows but needs 10", core(2, xc, shapeMat(9, 4), m))
	expectInputError(t, "Thm31Core yt cols", "yt has 5 columns but needs 4", core(2, xc, shapeMat(10, 5), m))
	expectInputError(t, "Thm31Core NaN", "compress.Thm31Core", core(2, mat.NewDense(10, 3, append([]float64{math.NaN()}, make([]float64, 29)...)), yt, m))
	expectInputError(t, "Thm31Core r < 0", "r ≥ 0", core(-1, xc, yt, m))

	expectInputError(t, "NewSubspace nil", "compress.NewSubspace: x is nil", func() error { _, err := NewSubspace(nil); return err })
	expectInputError(t, "ProjNuc nil", "compress.ProjNuc: y is nil", func() error { _, _, err := ProjNuc(nil, 1); return err })

	sub, err := NewSubspace(xc)
	if err != nil {
		t.Fatal(err)
	}
	psi := func(y *mat.Dense, sub *Subspace) func() error {
		return func() error { _, _, err := ProjectPsi(y, sub, 1, 1, ConvexOptions{}); return err }
	}
	expectInputError(t, "ProjectPsi nil y", "compress.ProjectPsi: y is nil", psi(nil, sub))
	expectInputError(t, "ProjectPsi nil sub", "compress.ProjectPsi: the subspace is nil", psi(yt, nil))
	expectInputError(t, "ProjectPsi y rows", "y has 9 rows but needs 10", psi(shapeMat(9, 4), sub))

	mle := func(z *mat.Dense, sub *Subspace, y0 *mat.Dense) func() error {
		return func() error {
			_, _, err := ReLUMLE(z, sub, 1, math.Inf(1), math.Inf(1), y0, ReLUOptions{MaxIter: 2})
			return err
		}
	}
	expectInputError(t, "ReLUMLE nil z", "compress.ReLUMLE: z is nil", mle(nil, sub, nil))
	expectInputError(t, "ReLUMLE nil sub", "compress.ReLUMLE: the subspace is nil", mle(yt, nil, nil))
	expectInputError(t, "ReLUMLE z rows", "z has 9 rows but needs 10", mle(shapeMat(9, 4), sub, nil))
	expectInputError(t, "ReLUMLE y0 cols", "y0 has 3 columns but needs 4", mle(yt, sub, shapeMat(10, 3)))

	expectInputError(t, "FitLayer empty W", "compress", func() error {
		_, err := FitLayer(Problem{W: &mat.Dense{}, X: xc}, MethodData, LayerOptions{})
		return err
	})
	expectInputError(t, "CompressMLP nil net", "", func() error {
		_, err := CompressMLP(t.Context(), nil, xc, Options{})
		return err
	})
}
