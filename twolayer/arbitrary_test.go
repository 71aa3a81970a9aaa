package twolayer

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// [BJW19, Thm 12] (the estimator of Plan–Vershynin 2013): with noiseless
// labels y = sign(⟨v, x⟩) the closed-form halfspace estimator has
// E‖ŵ − v‖² ≈ (π/2)(d−1)/n. Mean over 40 seeds (the relative sd of the mean
// is ≈ √(2/(d−1)/40) ≈ 5%), margin 20%.
func TestHalfspaceEstimateRate(t *testing.T) {
	const d, n, seeds = 20, 4000, 40
	sum := 0.0
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := synth.NewRand(seed)
		X, _ := synth.GaussianInputs(n, d, nil, rng)
		v := make([]float64, d)
		for j := range v {
			v[j] = rng.NormFloat64()
		}
		nv := math.Sqrt(dot(v, v))
		for j := range v {
			v[j] /= nv
		}
		y := make([]float64, n)
		for q := range y {
			y[q] = math.Copysign(1, dot(X.RawRowView(q), v))
		}
		w, err := HalfspaceEstimate(X, y)
		if err != nil {
			t.Fatal(err)
		}
		e := 0.0
		for j := range w {
			e += (w[j] - v[j]) * (w[j] - v[j])
		}
		sum += e
	}
	got, want := sum/seeds, math.Pi/2*(d-1)/n
	t.Logf("E‖ŵ − v‖² = %.4g, (π/2)(d−1)/n = %.4g", got, want)
	if r := got / want; r < 0.8 || r > 1.2 {
		t.Errorf("E‖ŵ − v‖² = %.4g, want (π/2)(d−1)/n = %.4g ± 20%%", got, want)
	}
}

// alg8Instance: Gaussian X, a k-unit teacher, Y = f(XV*ᵀ)U*ᵀ + E with
// Gaussian E of entry sd 0.3·rms(clean), a Gaussian sketch S (s×m, N(0,1/k)).
func alg8Instance(t testing.TB, seed uint64, d, k, m, s, n int) (teacher *nn.MLP, X, Y, S, E *mat.Dense) {
	t.Helper()
	rng := synth.NewRand(seed)
	cond := 2.0
	if k == 1 {
		cond = 0 // one unit row: κ is 1 by definition
	}
	teacher, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: d, K: k, M: m, CondV: cond}, rng)
	if err != nil {
		t.Fatal(err)
	}
	X, _ = synth.GaussianInputs(n, d, nil, rng)
	clean, _, err := synth.TwoLayerData(teacher, X, synth.Noise{}, rng)
	if err != nil {
		t.Fatal(err)
	}
	rms := mat.Norm(clean, 2) / math.Sqrt(float64(n*m))
	E, err = synth.ArbitraryNoise(n, m, synth.ArbGaussian, 0.3*rms, rng)
	if err != nil {
		t.Fatal(err)
	}
	Y = mat.NewDense(n, m, nil)
	Y.Add(clean, E)
	S = mat.NewDense(s, m, nil)
	for i := range S.RawMatrix().Data {
		S.RawMatrix().Data[i] = rng.NormFloat64() / math.Sqrt(float64(k))
	}
	return teacher, X, Y, S, E
}

// [BJW19, Alg 8] (§7) with the oracle candidate (S·U*)⁺ + Λ reaches
// a residual ≤ ‖E‖_F·(1 + small) for Gaussian E, and the selection picks it
// over random decoys (whose residuals are far larger).
func TestAlg8SelectPicksOracle(t *testing.T) {
	const d, k, m, s, n = 10, 3, 20, 8, 20000
	teacher, X, Y, S, E := alg8Instance(t, 1, d, k, m, s, n)
	U := teacher.Layers[1].Weight
	var SU mat.Dense
	SU.Mul(S, U)
	oracle, err := linalg.Pinv(&SU, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := synth.NewRand(99)
	for i := range oracle.RawMatrix().Data {
		oracle.RawMatrix().Data[i] += 1e-3 * rng.NormFloat64()
	}
	cands := []*mat.Dense{}
	for i := 0; i < 4; i++ {
		D := mat.NewDense(k, s, nil)
		for j := range D.RawMatrix().Data {
			D.RawMatrix().Data[j] = rng.NormFloat64()
		}
		cands = append(cands, D)
	}
	cands = append(cands[:2], append([]*mat.Dense{oracle}, cands[2:]...)...) // oracle at index 2
	res, err := Alg8Select(context.Background(), X, Y, S, cands, Alg8Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	normE := mat.Norm(E, 2)
	ratio := res.Residuals[2] / normE
	t.Logf("residual/‖E‖_F: %.4f (oracle), all %v, ‖E‖_F = %.4g", ratio, res.Residuals, normE)
	if res.Best != 2 {
		t.Errorf("selected candidate %d, want the oracle (2); residuals %v", res.Best, res.Residuals)
	}
	if ratio > 1.05 {
		t.Errorf("oracle residual %.4f·‖E‖_F, want ≤ 1.05·‖E‖_F", ratio)
	}
	for i, r := range res.Residuals {
		if i != 2 && r < 1.1*normE {
			t.Errorf("decoy %d has residual %.4f·‖E‖_F: too close for the test to discriminate", i, r/normE)
		}
	}
	if res.Route != RouteAlg8 || res.Certificate.Met {
		t.Errorf("route %s, certificate %+v", res.Route, res.Certificate)
	}
}

// Alg 8's full grid for k = 1 with a one-row sketch: 515 candidates at
// ε = 0.5; it must find a network better than U = 0 and close to ‖E‖_F.
func TestAlg8GridK1(t *testing.T) {
	_, X, Y, S, E := alg8Instance(t, 3, 8, 1, 5, 1, 5000)
	res, err := Alg8GridK1(context.Background(), X, Y, S, Alg8GridOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Residuals) != 515 || res.Best < 0 {
		t.Fatalf("%d candidates, best %d", len(res.Residuals), res.Best)
	}
	r := res.Residuals[res.Best] / mat.Norm(E, 2)
	t.Logf("k = 1 grid: best candidate %d of %d, residual %.4f·‖E‖_F", res.Best, len(res.Residuals), r)
	if r > 1.05 {
		t.Errorf("k = 1 grid: residual %.4f·‖E‖_F", r)
	}
	if _, err := Alg8GridK1(context.Background(), X, Y, mat.NewDense(3, 5, nil), Alg8GridOptions{}); !errors.Is(err, ErrInput) {
		t.Errorf("3-row sketch: err = %v, want ErrInput (grid too large)", err)
	}
	if g := Alg8GridSize(2, 200, 0.1, 2); g < 5000 || g > 5500 {
		t.Errorf("grid size for k=2, s=200, ε=0.1, κ=2: 10^%.0f, doc says ≈ 10^5250", g)
	}
}

func TestAlg8BadInput(t *testing.T) {
	_, X, Y, S, _ := alg8Instance(t, 4, 5, 2, 4, 3, 500)
	good := mat.NewDense(2, 3, []float64{1, 0, 0, 0, 1, 0})
	for name, f := range map[string]func() error{
		"no candidates": func() error { _, err := Alg8Select(context.Background(), X, Y, S, nil, Alg8Options{}); return err },
		"ragged": func() error {
			_, err := Alg8Select(context.Background(), X, Y, S, []*mat.Dense{good, mat.NewDense(1, 3, nil)}, Alg8Options{})
			return err
		},
		"sketch cols": func() error {
			_, err := Alg8Select(context.Background(), X, Y, mat.NewDense(3, 7, nil), []*mat.Dense{good}, Alg8Options{})
			return err
		},
		"labels eta":  func() error { _, err := Alg8Labels(Y, good, S, -1, nil); return err },
		"labels rng":  func() error { _, err := Alg8Labels(Y, good, S, 1, nil); return err },
		"halfspace n": func() error { _, err := HalfspaceEstimate(X, []float64{1}); return err },
		"halfspace 0": func() error { _, err := HalfspaceEstimate(X, make([]float64, 500)); return err },
		"grid eps": func() error {
			_, err := Alg8GridK1(context.Background(), X, Y, S.Slice(0, 1, 0, 4).(*mat.Dense), Alg8GridOptions{Eps: 2})
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", name, err)
		}
	}
}
