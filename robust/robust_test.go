package robust

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/synth"
)

// instance draws one observation with our reference setup: b ~ N(0, 0.5²),
// w ~ U[−0.1, 0.1], s outliers of magnitude mag·U[0.5, 1.5].
func instance(t testing.TB, seed uint64, d, k, s int, mag float64) (*synth.RobustInstance, []float64, []float64) {
	t.Helper()
	in, err := synth.RobustData(synth.RobustConfig{D: d, K: k, N: 1, S: s, Magnitude: mag, Delta: 0.1}, synth.NewRand(seed))
	if err != nil {
		t.Fatal(err)
	}
	v := in.V.RawRowView(0)
	cstar := in.C.RawRowView(0)
	return in, v, cstar
}

// oracleZW is z + w for row 0 with μ of the generator's N(0, 0.5²) bias.
func oracleZW(in *synth.RobustInstance, mu float64) []float64 {
	d, k := in.A.Dims()
	zw := make([]float64, d)
	c := in.C.RawRowView(0)
	for i := 0; i < d; i++ {
		ac := 0.0
		for l := 0; l < k; l++ {
			ac += in.A.At(i, l) * c[l]
		}
		zw[i] = math.Max(ac+in.B[i], 0) - mu*ac + in.W.At(0, i)
	}
	return zw
}

func errTo(c []float64, mu float64, cstar []float64) float64 {
	s := 0.0
	for i := range c {
		s += (c[i] - mu*cstar[i]) * (c[i] - mu*cstar[i])
	}
	return math.Sqrt(s)
}

func maxDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// T7: SSN, BCD and FISTA agree to 1e-8 and all meet the KKT certificate at
// 1e-9, over several thresholds.
func TestSolversAgree(t *testing.T) {
	in, v, _ := instance(t, 1, 600, 8, 30, 20)
	for _, tau := range []float64{0.5, 2, 8, 1e6} {
		var ref []float64
		for _, solver := range []SolverName{SolverSSN, SolverBCD, SolverFISTA} {
			r, err := Recover(in.A, v, Options{Tau: tau, Solver: solver})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Certificate.Met || !r.Converged {
				t.Errorf("τ=%g %s: converged %v, certificate %+v", tau, solver, r.Converged, r.Certificate)
			}
			if ref == nil {
				ref = r.C
				continue
			}
			if dd := maxDiff(ref, r.C); dd > 1e-8 {
				t.Errorf("τ=%g: %s differs from ssn by %.2e", tau, solver, dd)
			}
		}
	}
}

// T7: τ ≥ max |OLS residual| reproduces OLS exactly; τ → 0 approaches LAD.
func TestLimits(t *testing.T) {
	in, v, _ := instance(t, 2, 300, 5, 15, 10)
	s, err := NewSolver(in.A, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ols, _ := s.OLS(v)
	big := 2 * vec.MaxAbs(s.residual(v, ols))
	r, _ := Recover(in.A, v, Options{Tau: big})
	if dd := maxDiff(r.C, ols); dd > 1e-12 || r.Outliers != 0 {
		t.Errorf("τ = %g: differs from OLS by %.2e, %d outliers", big, dd, r.Outliers)
	}
	inf, _ := Recover(in.A, v, Options{Tau: math.Inf(1)})
	if dd := maxDiff(inf.C, ols); dd > 1e-12 || !inf.Certificate.Met {
		t.Errorf("τ = +Inf: differs from OLS by %.2e, certificate %+v", dd, inf.Certificate)
	}
	lad, _ := s.LAD(v, 0)
	small, _ := Recover(in.A, v, Options{Tau: 1e-4, MaxIter: 2000})
	if dd := maxDiff(small.C, lad); dd > 1e-3 {
		t.Errorf("τ = 1e-4: differs from LAD by %.2e", dd)
	}
	if !small.Certificate.Met {
		t.Errorf("small τ certificate %+v", small.Certificate)
	}
}

// T8: μ, σ², η² closed forms at spot values, the Gaussian μ
// closed form against quadrature, and Monte Carlo.
func TestMoments(t *testing.T) {
	for _, c := range []struct{ b, mu, s2, e2 float64 }{
		{0, 0.5, 0.25, 0.75}, {-1, 0.15866, 0.05017, 0.24036}, {2, 0.97725, 4.03921, 4.29473},
	} {
		m := MomentsAt(c.b)
		if math.Abs(m.Mu-c.mu) > 1e-5 || math.Abs(m.Sigma2-c.s2) > 1e-5 || math.Abs(m.Eta2-c.e2) > 1e-5 {
			t.Errorf("b=%g: %+v, want (%g, %g, %g)", c.b, m, c.mu, c.s2, c.e2)
		}
	}
	for _, g := range []density.Gaussian{{Mean: 0, Std: 0.5}, {Mean: -1, Std: 0.5}, {Mean: 1, Std: 2}} {
		closed := ScaleMoments(g).Mu
		quad := density.Expect(g, func(b float64) float64 { return hermite.NormCDF(b) })
		if math.Abs(closed-quad) > 1e-10 || math.Abs(closed-hermite.NormCDF(g.Mean/math.Sqrt(1+g.Std*g.Std))) > 1e-15 {
			t.Errorf("%s: μ closed %.12g, quadrature %.12g", g.Name(), closed, quad)
		}
	}
	if mu := ScaleMoments(density.Gaussian{Mean: -1, Std: 0.5}).Mu; math.Abs(mu-0.1855) > 1e-4 {
		t.Errorf("μ for N(−1, 0.25) = %.5f, want 0.1855", mu)
	}
	// Monte Carlo for a Laplace bias (no closed form).
	p := density.Laplace{Loc: 0.3, Scale: 0.7}
	m := ScaleMoments(p)
	rng := synth.NewRand(5)
	const n = 400000
	var sm, ss, se float64
	for i := 0; i < n; i++ {
		g, b := rng.NormFloat64(), density.Sample(p, rng)
		r := math.Max(g+b, 0)
		sm += g * r
		ss += (r - m.Mu*g) * (r - m.Mu*g)
		se += g * g * (r - m.Mu*g) * (r - m.Mu*g)
	}
	if math.Abs(sm/n-m.Mu) > 0.01 || math.Abs(ss/n-m.Sigma2) > 0.01 || math.Abs(se/n-m.Eta2)/m.Eta2 > 0.03 {
		t.Errorf("Monte Carlo (%.4f, %.4f, %.4f) vs closed %+v", sm/n, ss/n, se/n, m)
	}
}

// S6: with s = 0 and the oracle τ = 2‖z + w‖_∞ no residual exceeds τ, so
// ê = 0 and ĉ is OLS.
func TestNoOutliersGivesOLS(t *testing.T) {
	in, v, _ := instance(t, 3, 1000, 10, 0, 0)
	mu := ScaleMoments(density.Gaussian{Mean: 0, Std: 0.5}).Mu
	r, err := Recover(in.A, v, Options{Rule: RuleOracle, OracleZW: oracleZW(in, mu)})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSolver(in.A, Options{})
	ols, _ := s.OLS(v)
	if r.Outliers != 0 || maxDiff(r.C, ols) > 1e-12 {
		t.Errorf("oracle τ=%g: %d outliers, differs from OLS by %.2e", r.Tau, r.Outliers, maxDiff(r.C, ols))
	}
}

// S3 (fast version) and S4: the error stays bounded as the outliers grow
// while OLS grows ∝ E; ‖ĉ‖ ≈ μ and ĉ/‖ĉ‖ ≈ c*.
func TestRobustToMagnitude(t *testing.T) {
	mu := 0.5
	var huber, ols []float64
	for _, mag := range []float64{10, 100, 1000} {
		in, v, cstar := instance(t, 4, 4000, 10, 40, mag)
		r, err := Recover(in.A, v, Options{Rule: RuleOracle, OracleZW: oracleZW(in, mu)})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := NewSolver(in.A, Options{})
		o, _ := s.OLS(v)
		huber = append(huber, errTo(r.C, mu, cstar))
		ols = append(ols, errTo(o, mu, cstar))
		if math.Abs(math.Sqrt(vec.Dot(r.C, r.C))-mu) > 0.1 || errTo(r.Direction, 1, cstar) > 0.2 {
			t.Errorf("E=%g: ‖ĉ‖ = %.3f (μ = %.3f), direction error %.3f", mag, math.Sqrt(vec.Dot(r.C, r.C)), mu, errTo(r.Direction, 1, cstar))
		}
	}
	if huber[2] > 2*huber[0] || huber[2] > 0.1 {
		t.Errorf("Huber error grows with E: %v", huber)
	}
	if ols[2] < 50*ols[0] {
		t.Errorf("OLS error should grow ∝ E: %v", ols)
	}
}

// The MAD and plug-in rules give usable thresholds without the truth.
func TestRules(t *testing.T) {
	in, v, cstar := instance(t, 6, 4000, 10, 40, 50)
	bias := density.Gaussian{Mean: 0, Std: 0.5}
	for _, opt := range []Options{{Rule: RuleMAD}, {Rule: RulePlugin, Bias: bias, Delta: 0.1}, {Lambda: 2.0 / 4000}} {
		r, err := Recover(in.A, v, opt)
		if err != nil {
			t.Fatal(err)
		}
		if e := errTo(r.C, 0.5, cstar); e > 0.1 || !r.Certificate.Met {
			t.Errorf("%+v: τ=%.3g error %.3f certificate %v", opt.Rule, r.Tau, e, r.Certificate.Met)
		}
	}
	r, _ := Recover(in.A, v, Options{Bias: bias})
	if math.Abs(r.Mu-0.5) > 1e-12 || len(r.CScaled) != 10 || errTo(r.CScaled, 1, cstar) > 0.2 {
		t.Errorf("μ = %v, rescaled error %.3f", r.Mu, errTo(r.CScaled, 1, cstar))
	}
}

// Variants: linear model with exact recovery, intercept, known support,
// sparse code.
func TestVariants(t *testing.T) {
	rng := synth.NewRand(7)
	d, k := 500, 6
	A := mat.NewDense(d, k, nil)
	for i := 0; i < d; i++ {
		for j := 0; j < k; j++ {
			A.Set(i, j, rng.NormFloat64())
		}
	}
	c := []float64{1, -2, 0, 0, 0.5, 0}
	v := make([]float64, d)
	for i := range v {
		for j := range c {
			v[i] += A.At(i, j) * c[j]
		}
		v[i] += 3 // intercept
	}
	supp := []int{3, 50, 77, 200, 401}
	for _, i := range supp {
		v[i] += 40
	}
	// A tiny τ approaches LAD, which decodes exactly (Candès–Tao); the
	// Huber bias is O(τ·s/d).
	r, err := Recover(A, v, Options{Linear: true, Intercept: true, Tau: 1e-7, MaxIter: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if maxDiff(r.C, c) > 1e-7 || math.Abs(r.Intercept-3) > 1e-7 || r.Mu != 1 || !r.Certificate.Met {
		t.Errorf("linear+intercept: c %v intercept %v cert %+v", r.C, r.Intercept, r.Certificate)
	}
	r, _ = Recover(A, v, Options{Linear: true, Intercept: true, KnownSupport: supp})
	if maxDiff(r.C, c) > 1e-9 || math.Abs(r.E[50]-40) > 1e-8 || r.Outliers != 5 || !r.Certificate.Met {
		t.Errorf("known support: c %v e[50] %v outliers %d cert %+v", r.C, r.E[50], r.Outliers, r.Certificate)
	}
	// Sparse c with small dense noise: the zeros are found, the KKT holds.
	for i := range v {
		v[i] += 0.05 * (2*rng.Float64() - 1)
	}
	r, _ = Recover(A, v, Options{Linear: true, Intercept: true, Tau: 0.2, SparseC: 0.01})
	for _, j := range []int{2, 3, 5} {
		if r.C[j] != 0 {
			t.Errorf("sparse c: c[%d] = %g, want 0 (%v)", j, r.C[j], r.C)
		}
	}
	if !r.Certificate.Met || math.Abs(r.C[1]+2) > 0.1 {
		t.Errorf("sparse c: %v, certificate %+v", r.C, r.Certificate)
	}
	// The certificate catches a wrong answer.
	s, _ := NewSolver(A, Options{Linear: true, Intercept: true})
	bad := append(append([]float64(nil), c...), 2.9)
	e := make([]float64, d)
	if kkt := s.Certify(v, bad, e, 0.2); kkt.Met {
		t.Errorf("certificate met by a wrong answer: %+v", kkt)
	}
}

func TestRecoverAllDeterministic(t *testing.T) {
	in, err := synth.RobustData(synth.RobustConfig{D: 800, K: 5, N: 40, S: 20, Magnitude: 30, Delta: 0.1}, synth.NewRand(8))
	if err != nil {
		t.Fatal(err)
	}
	var ref *BatchResult
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		b, err := RecoverAll(context.Background(), in.A, in.V, Options{}, nil)
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		if !b.AllCertified {
			t.Errorf("not all certified, worst stationarity %.1e", b.MaxStationarity)
		}
		if ref != nil && !mat.Equal(ref.C, b.C) {
			t.Error("results differ across GOMAXPROCS")
		}
		ref = b
	}
	for i := 0; i < 40; i++ {
		if e := errTo(ref.C.RawRowView(i), 0.5, in.C.RawRowView(i)); e > 0.5 {
			t.Errorf("row %d: error %.3f", i, e)
		}
	}
}

func TestBadInput(t *testing.T) {
	in, v, _ := instance(t, 9, 100, 5, 5, 10)
	nanA := mat.DenseCopyOf(in.A)
	nanA.Set(3, 2, math.NaN())
	wide := mat.NewDense(4, 5, nil)
	dep := mat.DenseCopyOf(in.A)
	for i := 0; i < 100; i++ {
		dep.Set(i, 4, 2*dep.At(i, 0))
	}
	nanV := append([]float64(nil), v...)
	nanV[7] = math.Inf(1)
	for name, f := range map[string]func() error{
		"nil A":        func() error { _, err := Recover(nil, v, Options{}); return err },
		"NaN in A":     func() error { _, err := Recover(nanA, v, Options{}); return err },
		"d ≤ k":        func() error { _, err := Recover(wide, v[:4], Options{}); return err },
		"dependent":    func() error { _, err := Recover(dep, v, Options{}); return err },
		"short v":      func() error { _, err := Recover(in.A, v[:50], Options{}); return err },
		"Inf in v":     func() error { _, err := Recover(in.A, nanV, Options{}); return err },
		"rule":         func() error { _, err := Recover(in.A, v, Options{Rule: "magic"}); return err },
		"solver":       func() error { _, err := Recover(in.A, v, Options{Solver: "lp"}); return err },
		"plugin":       func() error { _, err := Recover(in.A, v, Options{Rule: RulePlugin}); return err },
		"oracle":       func() error { _, err := Recover(in.A, v, Options{Rule: RuleOracle}); return err },
		"negative tau": func() error { _, err := Recover(in.A, v, Options{Tau: -1}); return err },
		"bad bias":     func() error { _, err := Recover(in.A, v, Options{Bias: density.Gaussian{Std: -1}}); return err },
		"support":      func() error { _, err := Recover(in.A, v, Options{KnownSupport: []int{100}}); return err },
		"V shape": func() error {
			_, err := RecoverAll(context.Background(), in.A, mat.NewDense(3, 99, nil), Options{}, nil)
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", name, err)
		}
	}
}

func TestCodeNorm(t *testing.T) {
	p := density.Gaussian{Mean: 0.5, Std: 0.5}
	for _, r := range []float64{0.3, 1, 4} {
		target := r * density.Expect(p, func(b float64) float64 { return hermite.NormCDF(b / r) })
		if got := CodeNorm(p, target); math.Abs(got-r) > 1e-8*r {
			t.Errorf("CodeNorm = %v, want %v", got, r)
		}
	}
}

// The reference size of docs/robust.md: d = 20000, k = 50, 5% outliers of
// magnitude 50. The Huber solution meets its KKT conditions at 1e-9 and the
// cross-check solvers agree with it to 1e-8.
func TestAcceptanceSizeCrossCheck(t *testing.T) {
	in, v, _ := instance(t, 11, 20000, 50, 1000, 50)
	var ref []float64
	for _, solver := range []SolverName{SolverSSN, SolverBCD, SolverFISTA} {
		r, err := Recover(in.A, v, Options{Tau: 2, Solver: solver})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Certificate.Met {
			t.Errorf("%s: certificate %+v", solver, r.Certificate)
		}
		if ref == nil {
			ref = r.C
		} else if dd := maxDiff(ref, r.C); dd > 1e-8 {
			t.Errorf("%s differs from ssn by %.2e", solver, dd)
		}
	}
}
