package hermite

import (
	"fmt"
	"math"
	"testing"

	"github.com/relurec/relurec/internal/quad"
)

// [ATV21, Lemma 3.5] (1-D): c_k(b) = E[ReLU(z + b)·He_k(z)] by quadrature
// to 1e-7 (the composite rule of Coeff is far better than that).
func TestReLUBiasQuadrature(t *testing.T) {
	for _, b := range []float64{-2.3, -1.3, 0, 0.7, 2.1} {
		f := func(z float64) float64 { return math.Max(z+b, 0) }
		for k := 0; k <= 8; k++ {
			// Coeff splits at 0; shift so the kink sits there:
			// E[f(z)He_k(z)] with a kink at −b. Integrate directly instead.
			got := ReLUBias(k, b)
			want := quadKink(func(z float64) float64 { return f(z) * He(k, z) }, -b)
			if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Errorf("c_%d(%v) = %.12g, quadrature %.12g", k, b, got, want)
			}
		}
	}
	for k := 0; k <= 6; k++ {
		if got, want := ReLUBias(k, 0), (ReLU{}).Coeff(k); math.Abs(got-want) > 1e-15 {
			t.Errorf("c_%d(0) = %v, ReLU.Coeff = %v", k, got, want)
		}
	}
}

// quadKink integrates f(z)·φ(z) over R with panels split at the kink.
func quadKink(f func(float64) float64, kink float64) float64 {
	g := func(z float64) float64 { return f(z) * NormPDF(z) }
	lo, hi := math.Min(kink, -14), math.Max(kink, 14)
	return quad.GaussLegendre(g, lo, kink, 400) + quad.GaussLegendre(g, kink, hi, 400)
}

func TestReLUMeanTail(t *testing.T) {
	for _, b := range []float64{-40, -30, -10, -5, -3.0001, -2.9999, -1, 0, 3, 10} {
		want := quadKink(func(z float64) float64 { return math.Max(z+b, 0) }, -b)
		if b < -8 {
			// Quadrature underflows here; compare the asymptotic series
			// φ(b)/b²·Σ_j (−1)^j (2j+1)!!/b^{2j}, summed to its smallest term.
			z := 1 / (b * b)
			sum, term := 0.0, 1.0
			for j := 1; j < 200; j++ {
				next := -term * float64(2*j+1) * z
				sum += term
				if math.Abs(next) > math.Abs(term) {
					break
				}
				term = next
			}
			want = NormPDF(b) * z * sum
		}
		got := ReLUMean(b)
		tol := 1e-12
		if math.Abs(got-want) > tol*math.Abs(want) {
			t.Errorf("ReLUMean(%v) = %.15g, want %.15g (rel %.1e)", b, got, want, math.Abs(got-want)/want)
		}
	}
}

// [ATV21, Lemma 4.3]: min_z max(|He_{k+1}(z)|, |He_{k+2}(z)|) ≥ √(k!/2)
// for k ≥ 1 (the proof breaks at k = 0, where the minimum is 0.618…); want
// holds the minima measured by an independent scan.
func TestSeparationLemma(t *testing.T) {
	want := []float64{0.618, 0.903, 1.428, 2.784, 5.985, 14.16}
	fact := 1.0
	for k := 0; k <= 7; k++ {
		if k > 0 {
			fact *= float64(k)
		}
		lo := math.Inf(1)
		for i := -400000; i <= 400000; i++ {
			z := float64(i) * 1e-4 * 1.5 // |z| ≤ 60 covers every root region
			lo = math.Min(lo, math.Max(math.Abs(He(k+1, z)), math.Abs(He(k+2, z))))
		}
		if k >= 1 && lo < math.Sqrt(fact/2) {
			t.Errorf("k=%d: min max = %v < √(k!/2) = %v", k, lo, math.Sqrt(fact/2))
		}
		if k < len(want) && math.Abs(lo-want[k]) > 2e-3*want[k] {
			t.Errorf("k=%d: min max = %.4f, measured table %.4g", k, lo, want[k])
		}
	}
}

// [ATV21, Claim D.8] (Cramér): |He_k(z)|·e^{−z²/4} ≤ √(k!).
func TestCramerBound(t *testing.T) {
	for k := 0; k <= 14; k++ {
		bound := math.Exp(LogFactorial(k) / 2)
		for i := -3000; i <= 3000; i++ {
			z := float64(i) * 0.01
			if v := math.Abs(He(k, z)) * math.Exp(-z*z/4); v > bound*(1+1e-12) {
				t.Fatalf("k=%d z=%v: %v > √k! = %v", k, z, v, bound)
			}
		}
	}
}

// [ATV21, eq. 32] (Turán): He_{k+1}² − He_k·He_{k+2} =
// k!·Σ_{i≤k} He_i²/i!, to 1e-12 relative.
func TestTuranIdentity(t *testing.T) {
	for k := 0; k <= 10; k++ {
		for _, x := range []float64{-3.7, -1, -0.2, 0, 0.5, 1.9, 4.2} {
			lhs := He(k+1, x)*He(k+1, x) - He(k, x)*He(k+2, x)
			rhs := 0.0
			for i := 0; i <= k; i++ {
				rhs += He(i, x) * He(i, x) / math.Exp(LogFactorial(i))
			}
			rhs *= math.Exp(LogFactorial(k))
			if math.Abs(lhs-rhs) > 1e-12*math.Abs(rhs) || rhs <= 0 {
				t.Errorf("k=%d x=%v: %v vs %v", k, x, lhs, rhs)
			}
		}
	}
}

func TestHeNormalized(t *testing.T) {
	for n := 0; n <= 20; n++ {
		for _, x := range []float64{-2, 0.3, 5} {
			want := He(n, x) / math.Exp(LogFactorial(n)/2)
			if got := HeNormalized(n, x); math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("h_%d(%v) = %v, want %v", n, x, got, want)
			}
		}
	}
	if v := HeNormalized(300, 2); math.IsNaN(v) || math.IsInf(v, 0) {
		t.Errorf("h_300(2) = %v", v)
	}
}

// Φ₂ against Sheppard's formula at the origin, the independence and ±1
// limits, and a 1-D integral ∫_{−∞}^h φ(x)·Φ((k − ρx)/√(1−ρ²)) dx.
func TestBivariateNormalCDF(t *testing.T) {
	for _, r := range []float64{-0.999, -0.95, -0.8, -0.5, -0.1, 0, 0.2, 0.6, 0.9, 0.93, 0.99, 0.9999} {
		want := 0.25 + math.Asin(r)/(2*math.Pi)
		if got := BivariateNormalCDF(0, 0, r); math.Abs(got-want) > 1e-15 {
			t.Errorf("Φ₂(0,0;%v) = %.17g, want %.17g", r, got, want)
		}
	}
	pts := [][2]float64{{-2, 1}, {0.5, 0.3}, {1.5, -0.7}, {-1, -1}, {3, 2.5}, {-3.5, 0.2}, {0.1, -4}}
	for _, p := range pts {
		h, k := p[0], p[1]
		if got, want := BivariateNormalCDF(h, k, 0), NormCDF(h)*NormCDF(k); math.Abs(got-want) > 1e-16 {
			t.Errorf("independent Φ₂(%v,%v) = %v, want %v", h, k, got, want)
		}
		if got, want := BivariateNormalCDF(h, k, 1), NormCDF(math.Min(h, k)); math.Abs(got-want) > 1e-16 {
			t.Errorf("ρ=1 Φ₂(%v,%v) = %v, want %v", h, k, got, want)
		}
		if got, want := BivariateNormalCDF(h, k, -1), math.Max(0, NormCDF(h)-NormCDF(-k)); math.Abs(got-want) > 1e-16 {
			t.Errorf("ρ=−1 Φ₂(%v,%v) = %v, want %v", h, k, got, want)
		}
		for _, r := range []float64{-0.97, -0.6, -0.2, 0.25, 0.5, 0.8, 0.92, 0.95, 0.995} {
			s := math.Sqrt(1 - r*r)
			want := quad.GaussLegendre(func(x float64) float64 {
				return NormPDF(x) * NormCDF((k-r*x)/s)
			}, -40, h, 2000)
			got := BivariateNormalCDF(h, k, r)
			if math.Abs(got-want) > 2e-15 {
				t.Errorf("Φ₂(%v,%v;%v) = %.17g, integral %.17g (diff %.1e)", h, k, r, got, want, got-want)
			}
			// Symmetry in (h, k).
			if sw := BivariateNormalCDF(k, h, r); math.Abs(sw-got) > 1e-15 {
				t.Errorf("Φ₂ not symmetric at (%v,%v;%v): %v vs %v", h, k, r, got, sw)
			}
		}
	}
	if !math.IsNaN(BivariateNormalCDF(math.NaN(), 0, 0)) {
		t.Error("NaN in, not NaN out")
	}
	if got := BivariateNormalCDF(math.Inf(1), 0.3, 0.4); math.Abs(got-NormCDF(0.3)) > 1e-16 {
		t.Errorf("Φ₂(+Inf, 0.3) = %v", got)
	}
}

func ExampleReLUBias() {
	// The order-3 coefficient vanishes at b = 0 and the order-4 one at the
	// roots ±1 of He_2: every unit still shows up in one of two
	// consecutive orders ([ATV21, Alg 1]).
	for _, b := range []float64{0, 1} {
		fmt.Printf("b=%v: c3=%.4f c4=%.4f\n", b, ReLUBias(3, b), ReLUBias(4, b))
	}
	// Output:
	// b=0: c3=-0.0000 c4=-0.3989
	// b=1: c3=-0.2420 c4=0.0000
}
