package hermite

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestRectifiedClosedForms(t *testing.T) {
	// Against values integrated independently and against quadrature.
	table := map[string][]float64{
		"relupow2": {0.5, 0.797885, 1.0, 0.797885, 0, -0.797885, 0},
		"reluexp":  {0.887143, 1.387143, 1.786085, 1.786085, 1.387143, 1.387143, 2.583970},
	}
	for _, a := range []Activation{RectPow{2}, RectExp{}} {
		for r, w := range table[a.Name()] {
			if got := a.Coeff(r); math.Abs(got-w) > 1e-6 {
				t.Errorf("%s c_%d = %.7f, want %.6f", a.Name(), r, got, w)
			}
		}
	}
	// ReLU as RectPow{1} agrees with the ReLU's closed form to rounding.
	for r := 0; r <= 8; r++ {
		if got, want := (RectPow{1}).Coeff(r), (ReLU{}).Coeff(r); math.Abs(got-want) > 1e-13 {
			t.Errorf("relupow1 c_%d = %v, relu %v", r, got, want)
		}
	}
	// Quadrature for activations smooth away from 0 (quadrature loses
	// accuracy for C < 1, whose derivative is unbounded at 0).
	for _, a := range []Activation{RectPow{2}, RectPow{3}, RectPow{2.5}, RectExp{}} {
		for r := 0; r <= 6; r++ {
			got, want := a.Coeff(r), Coeff(a.Eval, r)
			// z^2.5 has an unbounded third derivative at 0: quadrature is
			// good to ~1e-9 there, to ~1e-12 elsewhere.
			if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Errorf("%s c_%d: closed form %.15g, quadrature %.15g", a.Name(), r, got, want)
			}
		}
	}
	// Exact value: x³ has c_3 = E[z³₊·(z³ − 3z)] = M(6) − 3·M(4) = 15/2 − 9/2 = 3
	// (half the Gaussian moments 15 and 3).
	if got := (RectPow{3}).Coeff(3); math.Abs(got-3) > 1e-14 {
		t.Errorf("relupow3 c_3 = %v, want 3", got)
	}
	if got := (RectPow{0.5}).Coeff(0); math.Abs(got-math.Gamma(0.75)/(math.Pow(2, 0.75)*math.Sqrt(math.Pi))) > 1e-15 {
		t.Errorf("relupow0.5 c_0 = %v", got)
	}
	if !math.IsNaN((RectPow{0}).Coeff(2)) || !math.IsNaN((RectPow{-1}).Coeff(2)) {
		t.Error("RectPow with C ≤ 0 must give NaN")
	}
}

// Monte Carlo check of the closed forms, including C = 0.5 where quadrature
// is weak: 4e5 samples give a standard error ≲ 0.01 for r ≤ 4.
func TestRectifiedMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 400000
	acts := []Activation{RectPow{0.5}, RectPow{2}, RectPow{3}, RectExp{}}
	sum := make([][5]float64, len(acts))
	sq := make([][5]float64, len(acts))
	for i := 0; i < n; i++ {
		z := rng.NormFloat64()
		for ai, a := range acts {
			f := a.Eval(z)
			for r := 0; r <= 4; r++ {
				v := f * He(r, z)
				sum[ai][r] += v
				sq[ai][r] += v * v
			}
		}
	}
	for ai, a := range acts {
		for r := 0; r <= 4; r++ {
			mean := sum[ai][r] / n
			se := math.Sqrt((sq[ai][r]/n - mean*mean) / n)
			if want := a.Coeff(r); math.Abs(mean-want) > 5*se {
				t.Errorf("%s c_%d: closed form %.5f, Monte Carlo %.5f ± %.5f", a.Name(), r, want, mean, se)
			}
		}
	}
}

func TestTensorOrderRectified(t *testing.T) {
	for _, c := range []struct {
		a    Activation
		want int
	}{{ReLU{}, 4}, {RectPow{1}, 4}, {RectPow{2}, 3}, {RectPow{3}, 3}, {RectPow{0.5}, 4}, {RectExp{}, 3}} {
		got, err := TensorOrder(c.a)
		if err != nil || got != c.want {
			t.Errorf("TensorOrder(%s) = %d, %v; want %d (c_3 = %.4f, c_4 = %.4f)", c.a.Name(), got, err, c.want, c.a.Coeff(3), c.a.Coeff(4))
		}
	}
	if _, err := TensorOrder(RectPow{-1}); err == nil {
		t.Error("TensorOrder accepted RectPow{-1}")
	}
	t.Logf("c_0..c_6: relupow0.5 %.6f, relupow3 %.6f", Coeffs(RectPow{0.5}, 6), Coeffs(RectPow{3}, 6))
}
