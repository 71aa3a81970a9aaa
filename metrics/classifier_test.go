package metrics

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestCompareLogits(t *testing.T) {
	ref := mat.NewDense(4, 2, []float64{1, 0, 0, 1, 2, 1, 0, 3})
	z := mat.NewDense(4, 2, []float64{1, 0, 2, 1, 2, 1, 1, 0}) // rows 1 and 3 change class
	labels := []int{0, 0, 1, 1}
	f, err := CompareLogits(z, ref, labels)
	if err != nil {
		t.Fatal(err)
	}
	// Row 1: only the model is right; row 2: both wrong; row 3: only the
	// reference is right.
	if f.Agreement != 0.5 || f.OnlyModel != 1 || f.OnlyRef != 1 || f.McNemarP != 1 {
		t.Fatalf("%+v", f)
	}
	if want := math.Sqrt(4+1+9) / math.Sqrt(1+1+4+1+9); math.Abs(f.LogitError-want) > 1e-15 {
		t.Fatalf("logit error %v, want %v", f.LogitError, want)
	}
	if _, err := CompareLogits(z, ref.Slice(0, 3, 0, 2).(*mat.Dense), nil); err == nil {
		t.Fatal("mismatched shapes accepted")
	}
	if _, err := CompareLogits(z, ref, []int{0}); err == nil {
		t.Fatal("wrong number of labels accepted")
	}
}

// McNemarExact against values computed by hand and by an exact binomial sum in Python
// (two-sided): b=31, c=35 gives 0.7122; b=17, c=29 gives 0.1038.
func TestMcNemarExact(t *testing.T) {
	for _, c := range []struct {
		b, c int
		want float64
	}{
		{0, 0, 1},
		{0, 1, 1},
		{0, 5, 2.0 / 32},
		{1, 5, 2 * 7.0 / 64},
		{31, 35, 0.7122},
		{17, 29, 0.1038},
	} {
		if got := McNemarExact(c.b, c.c); math.Abs(got-c.want) > 5e-5 {
			t.Errorf("McNemarExact(%d, %d) = %.6f, want %.4f", c.b, c.c, got, c.want)
		}
		if McNemarExact(c.b, c.c) != McNemarExact(c.c, c.b) {
			t.Errorf("McNemarExact(%d, %d) is not symmetric", c.b, c.c)
		}
	}
	// Large counts stay finite and tiny where the difference is large.
	if p := McNemarExact(1000, 2000); !(p > 0 && p < 1e-70) {
		t.Errorf("McNemarExact(1000, 2000) = %g", p)
	}
}
