package hermite

import (
	"fmt"
	"math"
	"testing"
)

// The ReLU's Hermite coefficients c = (1/√2π, 1/2, 1/√2π, 0, −1/√2π, 0,
// 3/√2π): c_3 = 0, so [BJW19, Alg 4]'s order-3 tensor vanishes for the ReLU.
func TestReLUCoefficients(t *testing.T) {
	want := []float64{InvSqrt2Pi, 0.5, InvSqrt2Pi, 0, -InvSqrt2Pi, 0, 3 * InvSqrt2Pi}
	relu := ReLU{}
	for r, w := range want {
		if got := relu.Coeff(r); math.Abs(got-w) > 1e-15 {
			t.Errorf("closed form c_%d = %v, want %v", r, got, w)
		}
		if got := Coeff(relu.Eval, r); math.Abs(got-w) > 1e-10 {
			t.Errorf("quadrature c_%d = %v, want %v", r, got, w)
		}
	}
}

// The coefficients of ReLU² and e^x − 1 ([BJW19, App. 9.1]; values integrated
// independently).
func TestCoefficientTable(t *testing.T) {
	relu2 := func(x float64) float64 { return math.Pow(math.Max(x, 0), 2) }
	expm1 := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return math.Expm1(x)
	}
	cases := []struct {
		name string
		f    func(float64) float64
		want []float64
	}{
		{"relu2", relu2, []float64{0.5, 0.797885, 1.0, 0.797885, 0, -0.797885, 0}},
		{"expm1", expm1, []float64{0.887143, 1.387143, 1.786085, 1.786085, 1.387143, 1.387143, 2.583970}},
	}
	for _, c := range cases {
		for r, w := range c.want {
			if got := Coeff(c.f, r); math.Abs(got-w) > 2e-6 {
				t.Errorf("%s c_%d = %.7f, want %.6f", c.name, r, got, w)
			}
		}
	}
}

func TestTensorOrder(t *testing.T) {
	if r, err := TensorOrder(ReLU{}); err != nil || r != 4 {
		t.Fatalf("ReLU order = %d, %v; want 4", r, err)
	}
}

func TestHeOrthogonality(t *testing.T) {
	fact := 1.0
	for n := 0; n <= 6; n++ {
		if n > 0 {
			fact *= float64(n)
		}
		for m := 0; m <= 6; m++ {
			got := Coeff(func(x float64) float64 { return He(m, x) }, n)
			want := 0.0
			if n == m {
				want = fact
			}
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("E[He_%d He_%d] = %v, want %v", n, m, got, want)
			}
		}
	}
}

func ExampleReLU_Coeff() {
	for r := 0; r <= 4; r++ {
		fmt.Printf("c_%d = %.6f\n", r, ReLU{}.Coeff(r))
	}
	// Output:
	// c_0 = 0.398942
	// c_1 = 0.500000
	// c_2 = 0.398942
	// c_3 = 0.000000
	// c_4 = -0.398942
}
