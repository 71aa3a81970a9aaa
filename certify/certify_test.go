package certify

import (
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
)

func TestNew(t *testing.T) {
	if c := New(1e-12, 1e-10, 5); !c.Met || c.Samples != 5 {
		t.Errorf("New(1e-12, 1e-10): %+v", c)
	}
	if c := New(math.NaN(), 1e-10, 5); c.Met {
		t.Error("a NaN residual met the certificate")
	}
	if c := New(2e-10, 1e-10, 5); c.Met {
		t.Error("a residual above tol met the certificate")
	}
}

func TestCheckXY(t *testing.T) {
	X := mat.NewDense(3, 2, []float64{1, 2, 3, 4, 5, 6})
	Y := mat.NewDense(3, 1, []float64{1, 2, 3})
	if n, d, m, err := CheckXY(X, Y); err != nil || n != 3 || d != 2 || m != 1 {
		t.Fatalf("CheckXY = %d %d %d %v", n, d, m, err)
	}
	bad := mat.NewDense(3, 1, []float64{1, math.NaN(), 3})
	for name, tc := range map[string]struct {
		X, Y *mat.Dense
		want string
	}{
		"nil":  {nil, Y, "required"},
		"rows": {X, mat.NewDense(2, 1, nil), "X has 3 rows but Y has 2"},
		"nan":  {X, bad, "NaN at row 1"},
	} {
		_, _, _, err := CheckXY(tc.X, tc.Y)
		if !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInput and %q", name, err, tc.want)
		}
	}
}

func TestRoundoff(t *testing.T) {
	f32 := mat.NewDense(2, 2, []float64{0.5, float64(float32(0.1)), 3, -2})
	f64 := mat.NewDense(1, 2, []float64{1, 0.1})
	if u := Roundoff(f32); u != Float32Roundoff {
		t.Errorf("float32 values: %g", u)
	}
	if u := Roundoff(f32, f64); u != Float64Roundoff {
		t.Errorf("one float64 value among them: %g", u)
	}
	if tol := DefaultTol(Float64Roundoff); tol != 1e-10 {
		t.Errorf("float64 tolerance %g", tol)
	}
	if tol := DefaultTol(Float32Roundoff); tol < 1e-7 || tol > 1e-6 {
		t.Errorf("float32 tolerance %g", tol)
	}
}

// Samples scaled to 1e±160 are refused with ErrInput and a hint to
// rescale: their squares leave float64's normal range, where the learners
// cannot work; 1e±100 pass.
func TestCheckScale(t *testing.T) {
	scaled := func(s float64) *mat.Dense {
		A := mat.NewDense(100, 10, nil)
		for i := range A.RawMatrix().Data {
			A.RawMatrix().Data[i] = s * float64(i%7-3)
		}
		return A
	}
	for _, s := range []float64{1e160, 1e-160} {
		err := CheckScale("X", scaled(s))
		if !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "divide X") && !strings.Contains(err.Error(), "multiply X") {
			t.Errorf("scale %g: %v, want an ErrInput saying how to rescale X", s, err)
		}
		if _, _, _, err := CheckXY(scaled(1), scaled(s)); !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "Y's largest entry") {
			t.Errorf("CheckXY with Y scaled by %g: %v", s, err)
		}
	}
	for _, s := range []float64{1e100, 1e-100, 0} {
		if err := CheckScale("X", scaled(s)); err != nil {
			t.Errorf("scale %g refused: %v", s, err)
		}
	}
}
