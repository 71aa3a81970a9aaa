package density

import (
	"errors"
	"math"
	"sort"
	"testing"

	"math/rand/v2"
)

func builtins() []Density {
	return []Density{
		Gaussian{0, 1}, Gaussian{-2, 1}, Gaussian{1.5, 0.7}, Gaussian{0.3, 2},
		Logistic{0, 1}, Logistic{-2.5, 0.8}, Logistic{3, 1.2},
		Laplace{0, 1}, Laplace{-0.5, 0.6}, Laplace{2, 1.5},
		ShiftedExp{-1.5, 1}, ShiftedExp{-3, 0.5},
		Uniform{-2, 3}, Uniform{-1.5, 1.5},
	}
}

func relClose(a, b, tol float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}

// T3: closed forms of β_γ, L_γ and ω match the numeric fallback to 1e-6.
func TestClosedFormsMatchNumeric(t *testing.T) {
	const gamma, nu = 1.0, 0.1
	for _, p := range builtins() {
		c := p.(ClosedForms)
		if b, ok := c.BetaClosed(gamma); ok {
			if n := BetaNumeric(p, gamma); !relClose(b, n, 1e-6) && !(b == 0 && n < 1e-12) {
				t.Errorf("%s: β closed %.10g, numeric %.10g", p.Name(), b, n)
			}
		}
		if l, ok := c.LipClosed(gamma); ok {
			if n := LipNumeric(p, gamma); !relClose(l, n, 1e-6) {
				t.Errorf("%s: L closed %.10g, numeric %.10g", p.Name(), l, n)
			}
		}
		if w, ok := c.OmegaClosed(gamma, nu); ok {
			if n := OmegaNumeric(p, gamma, nu); !relClose(w, n, 1e-6) {
				t.Errorf("%s: ω closed %.10g, numeric %.10g", p.Name(), w, n)
			}
		}
	}
}

// T3: β_γ = 0 exactly when the mode of a Gaussian or logistic lies in [−γ, γ];
// the Theorem 3 bound is then +Inf, not a crash.
func TestBetaZeroAndInfiniteBound(t *testing.T) {
	for _, m := range []float64{-1, -0.5, 0, 0.99, 1} {
		for _, p := range []Density{Gaussian{m, 1}, Logistic{m, 1}} {
			if b := Beta(p, 1); b != 0 {
				t.Errorf("%s: β_1 = %g, want 0", p.Name(), b)
			}
			if bound := Theorem3Bound(p, 1, 0.1, 100, 0); !math.IsInf(bound, 1) {
				t.Errorf("%s: bound %g, want +Inf", p.Name(), bound)
			}
		}
	}
	for _, m := range []float64{-1.01, 2} {
		for _, p := range []Density{Gaussian{m, 1}, Logistic{m, 1}} {
			if b := Beta(p, 1); !(b > 0) {
				t.Errorf("%s: β_1 = %g, want > 0", p.Name(), b)
			}
		}
	}
	if b := Theorem3Bound(Uniform{-2, 2}, 1, 0.1, 10, 0); !math.IsInf(b, 1) {
		t.Errorf("uniform bound %g, want +Inf", b)
	}
	if b := Theorem3Bound(Laplace{0, 1}, 1, 3, 10, 0); !math.IsNaN(b) {
		t.Errorf("ν > 2γ: bound %g, want NaN", b)
	}
}

// Worked examples (closed forms).
func TestSpecExamples(t *testing.T) {
	cases := []struct {
		p             Density
		beta, lip, om float64
		ratio         float64
	}{
		{Laplace{0, 1}, 0.045985, 1, 0.019345, 1124.1},
		{Gaussian{-2, 1}, 0.0099717, 3, 5.159e-4, 5.83e5},
	}
	for _, c := range cases {
		b, l, w := Beta(c.p, 1), Lip(c.p, 1), Omega(c.p, 1, 0.1)
		if !relClose(b, c.beta, 1e-4) || !relClose(l, c.lip, 1e-4) || !relClose(w, c.om, 1e-3) || !relClose(l/(b*w), c.ratio, 2e-3) {
			t.Errorf("%s: β %.6g L %.6g ω %.6g L/(βω) %.6g; want %g %g %g %g", c.p.Name(), b, l, w, l/(b*w), c.beta, c.lip, c.om, c.ratio)
		}
	}
	want := DefaultC0 * 1124.1 * 1 * 1 // per unit d and γ
	if got := Theorem3Bound(Laplace{0, 1}, 1, 0.1, 1, 0); !relClose(got, want, 1e-3) {
		t.Errorf("Laplace bound per d = %.6g, want %.6g (≈ 24 445)", got, want)
	}
}

// Every method is consistent: CDF is the integral of exp(LogPDF), LogCDF is
// log CDF, RevHazard is p/F, Score is the derivative of LogPDF, Quantile
// inverts CDF, and samples follow the CDF (Kolmogorov–Smirnov).
func TestMethodsConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range builtins() {
		if err := checkNumerically(p); err != nil {
			t.Errorf("%s: %v", p.Name(), err)
		}
		for _, u := range []float64{1e-6, 0.1, 0.37, 0.5, 0.8, 0.999} {
			x := p.Quantile(u)
			if !relClose(p.CDF(x), u, 1e-9) {
				t.Errorf("%s: CDF(Quantile(%g)) = %.12g", p.Name(), u, p.CDF(x))
			}
			if !relClose(p.LogCDF(x), math.Log(u), 1e-9) {
				t.Errorf("%s: LogCDF = %.12g, want %.12g", p.Name(), p.LogCDF(x), math.Log(u))
			}
			if rh := math.Exp(p.LogPDF(x)) / u; !relClose(p.RevHazard(x), rh, 1e-8) {
				t.Errorf("%s: RevHazard(%g) = %.12g, want %.12g", p.Name(), x, p.RevHazard(x), rh)
			}
		}
		const n = 4000
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = Sample(p, rng)
		}
		sort.Float64s(xs)
		ks := 0.0
		for i, x := range xs {
			f := p.CDF(x)
			ks = math.Max(ks, math.Max(math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n)))
		}
		if ks > 1.63/math.Sqrt(n) { // 1% level
			t.Errorf("%s: KS statistic %.4f", p.Name(), ks)
		}
	}
}

func TestGaussianTails(t *testing.T) {
	g := Gaussian{0, 1}
	if v := g.LogCDF(-40); math.IsInf(v, 0) || math.Abs(v+804.6084420137538) > 1e-9 {
		t.Errorf("LogCDF(-40) = %v", v)
	}
	if v := g.RevHazard(-40); !relClose(v, 40.0249, 1e-4) {
		t.Errorf("RevHazard(-40) = %v, want ≈ 40.025", v)
	}
	if v := (Logistic{0, 1}).LogCDF(-800); v != -800 {
		t.Errorf("logistic LogCDF(-800) = %v", v)
	}
}

func TestExpect(t *testing.T) {
	for _, c := range []struct {
		p          Density
		mean, vari float64
	}{
		{Gaussian{0.5, 2}, 0.5, 4}, {Logistic{1, 0.5}, 1, math.Pi * math.Pi * 0.25 / 3},
		{Laplace{-1, 0.5}, -1, 0.5}, {ShiftedExp{-2, 2}, -1.5, 0.25}, {Uniform{-1, 3}, 1, 16.0 / 12},
	} {
		m := Expect(c.p, func(x float64) float64 { return x })
		v := Expect(c.p, func(x float64) float64 { return (x - c.mean) * (x - c.mean) })
		if math.Abs(m-c.mean) > 1e-9 || !relClose(v, c.vari, 1e-8) {
			t.Errorf("%s: mean %.12g var %.12g, want %g %g", c.p.Name(), m, v, c.mean, c.vari)
		}
	}
}

func TestCustom(t *testing.T) {
	// A logistic density given by hand is accepted and agrees with Logistic.
	ref := Logistic{0.5, 1}
	c, err := NewCustom("my-logistic", ref.LogPDF, ref.Score, ref.CDF, 0.5, math.Inf(-1), math.Inf(1))
	if err != nil {
		t.Fatal(err)
	}
	if b, r := Beta(c, 1), Beta(ref, 1); math.Abs(b-r) > 1e-12 {
		t.Errorf("custom β %g, logistic %g", b, r)
	}
	if l, r := Lip(c, 1), Lip(ref, 1); !relClose(l, r, 1e-6) {
		t.Errorf("custom L %g, logistic %g", l, r)
	}
	if q := c.Quantile(0.3); !relClose(q, ref.Quantile(0.3), 1e-9) {
		t.Errorf("custom quantile %g", q)
	}
	// Not densities.
	g := Gaussian{0, 1}
	bad := []struct {
		name               string
		logpdf, score, cdf func(float64) float64
	}{
		{"unnormalised", func(x float64) float64 { return g.LogPDF(x) + math.Log(2) }, g.Score, g.CDF},
		{"cdf of another law", g.LogPDF, g.Score, Logistic{0, 1}.CDF},
		{"wrong score", g.LogPDF, func(x float64) float64 { return x }, g.CDF},
		{"decreasing cdf", g.LogPDF, g.Score, func(x float64) float64 { return 1 - g.CDF(x) }},
	}
	for _, b := range bad {
		if _, err := NewCustom(b.name, b.logpdf, b.score, b.cdf, 0, math.Inf(-1), math.Inf(1)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", b.name, err)
		}
	}
	if _, err := NewCustom("nil", nil, g.Score, g.CDF, 0, -1, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil log-pdf accepted")
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]Density{
		"gaussian:0,1": Gaussian{0, 1}, "normal:-1,0.5": Gaussian{-1, 0.5}, "laplace": Laplace{0, 1},
		"logistic:2,3": Logistic{2, 3}, "exp:-2,1.5": ShiftedExp{-2, 1.5}, "uniform:-3,3": Uniform{-3, 3},
		" Gaussian : 1 , 2 ": Gaussian{1, 2},
	} {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"cauchy:0,1", "gaussian:0,-1", "gaussian:0", "uniform:2,1", "laplace:a,b", "gaussian:NaN,1", ""} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q): err = %v, want ErrInvalid", s, err)
		}
	}
}
