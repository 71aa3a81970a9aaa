package twolayer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// newActInstance is newInstance with the hidden activation act. With
// scaleRows the rows of V get norms in [0.6, 1.4] (they are unit otherwise),
// which matters for reluexp, where the norms are part of the function.
func newActInstance(t testing.TB, seed uint64, cfg synth.TwoLayerConfig, n int, act nn.Activation, scaleRows bool, noise synth.Noise) instance {
	t.Helper()
	rng := synth.NewRand(seed)
	teacher, err := synth.TwoLayerTeacher(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	teacher.Layers[0].Act = act
	if scaleRows {
		V := teacher.Layers[0].Weight
		for j := 0; j < cfg.K; j++ {
			row := V.RawRowView(j)
			s := 0.6 + 0.8*rng.Float64()
			for a := range row {
				row[a] *= s
			}
		}
	}
	X, err := synth.GaussianInputs(n, cfg.D, nil, rng)
	if err != nil {
		t.Fatal(err)
	}
	Y, _, err := synth.TwoLayerData(teacher, X, noise, rng)
	if err != nil {
		t.Fatal(err)
	}
	return instance{teacher: teacher, V: teacher.Layers[0].Weight, U: teacher.Layers[1].Weight, X: X, Y: Y}
}

// canonicalError is the largest relative entry error of V and of U between
// two networks in canonical form: for homogeneous φ rows are unit and U
// absorbs s^c; for reluexp nothing is rescaled, so the row norms are
// compared as they are. Both are sorted by the same rule, so an exact
// recovery lines the units up.
func canonicalError(truth, est *nn.MLP) (errV, errU float64) {
	a, b := truth.Canonical(), est.Canonical()
	rel := func(x, y *mat.Dense) float64 {
		var d mat.Dense
		d.Sub(x, y)
		return mat.Norm(&d, math.Inf(1)) / mat.Norm(x, math.Inf(1))
	}
	return rel(a.Layers[0].Weight, b.Layers[0].Weight), rel(a.Layers[1].Weight, b.Layers[1].Weight)
}

// [BJW19, App. 9.1] for rectified activations: noiseless Gaussian X, d=20,
// k=5, m=8, n=1e5: exact recovery for φ = x², x³ and e^x − 1 (rows of norm
// 0.6–1.4 for e^x − 1, recovered with their norms), with the tensor order
// the c_r table predicts (3 for all three).
func TestExactRecoveryActivations(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 20, K: 5, M: 8, CondV: 3}
	for i, act := range []nn.Activation{nn.RectPow(2), nn.RectPow(3), nn.RectExp} {
		t.Run(string(act), func(t *testing.T) {
			in := newActInstance(t, uint64(40+i), cfg, 100000, act, act == nn.RectExp, synth.Noise{})
			res, err := Fit(context.Background(), in.X, in.Y, Options{Activation: act, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := hermite.TensorOrder(hermiteActivation(act))
			if res.Diagnostics.TensorOrder != want || want != 3 {
				t.Errorf("tensor order %d, the c_r table predicts %d", res.Diagnostics.TensorOrder, want)
			}
			if res.Model.Layers[0].Act != act {
				t.Fatalf("model activation %s, want %s", res.Model.Layers[0].Act, act)
			}
			eV, eU := canonicalError(in.teacher, res.Model)
			if res.Route != RouteExact || !res.Certificate.Met || res.Certificate.Residual > 1e-10 || eV > 1e-9 || eU > 1e-9 {
				t.Errorf("route %s (%s), certificate %+v, weight errors V %.2e U %.2e; warnings %v", res.Route, res.Reason, res.Certificate, eV, eU, res.Warnings)
			}
			t.Logf("%s: residual %.1e, errors V %.1e U %.1e, %v", act, res.Certificate.Residual, eV, eU, res.Elapsed)
			if act == nn.RectExp {
				// The norms are recovered, not normalised away.
				for j := 0; j < 5; j++ {
					if nv := mat.Norm(res.Model.Layers[0].Weight.RowView(j), 2); math.Abs(nv-1) < 1e-3 {
						t.Errorf("row %d has norm %v: reluexp rows must keep their norms (0.6–1.4)", j, nv)
					}
				}
			}
		})
	}
}

// √ReLU: the c_r table picks order 4 (|c_4| > |c_3|); recovery is exact.
func TestExactRecoverySqrt(t *testing.T) {
	act := nn.RectPow(0.5)
	in := newActInstance(t, 7, synth.TwoLayerConfig{D: 12, K: 4, M: 6, CondV: 2}, 60000, act, false, synth.Noise{})
	res, err := Fit(context.Background(), in.X, in.Y, Options{Activation: act, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	eV, eU := canonicalError(in.teacher, res.Model)
	if res.Diagnostics.TensorOrder != 4 || !res.Certificate.Met || eV > 1e-9 || eU > 1e-9 {
		t.Errorf("order %d, route %s (%s), certificate %+v, errors V %.2e U %.2e", res.Diagnostics.TensorOrder, res.Route, res.Reason, res.Certificate, eV, eU)
	}
}

// The wrong activation cannot be certified: x² data fitted as ReLU (or as
// e^x − 1) fails the exact route.
func TestWrongActivationNotCertified(t *testing.T) {
	in := newActInstance(t, 3, synth.TwoLayerConfig{D: 10, K: 3, M: 5, CondV: 2}, 30000, nn.RectPow(2), false, synth.Noise{})
	for _, act := range []nn.Activation{nn.ReLU, nn.RectExp, nn.RectPow(3)} {
		_, err := Fit(context.Background(), in.X, in.Y, Options{Activation: act, Route: "exact", Seed: 1})
		if !errors.Is(err, ErrNotExact) {
			t.Errorf("%s on x² data: err %v, want ErrNotExact", act, err)
		}
	}
}

// expScale recovers the output scale and the row of an e^x − 1 unit from
// its active samples to rounding, from scales far from 1.
func TestExpScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const p, d = 300, 15
	for _, s := range []float64{1e-3, 0.2, 1, 7, 4e4} {
		v := make([]float64, d)
		for j := range v {
			v[j] = rng.NormFloat64() * 0.3
		}
		XP := mat.NewDense(p, d, nil)
		r := make([]float64, p)
		for q := 0; q < p; q++ {
			for {
				row := XP.RawRowView(q)
				for j := range row {
					row[j] = rng.NormFloat64()
				}
				if t := dot(row, v); t > 0 {
					r[q] = s * math.Expm1(t)
					break
				}
			}
		}
		a, z, rel, err := expScale(XP, r)
		if err != nil {
			t.Fatal(err)
		}
		dz := 0.0
		for j := range v {
			dz = math.Max(dz, math.Abs(z[j]-v[j]))
		}
		if math.Abs(a*s-1) > 1e-10 || dz > 1e-10 || rel > 1e-12 {
			t.Errorf("s = %g: a·s − 1 = %.1e, row error %.1e, residual %.1e", s, a*s-1, dz, rel)
		}
	}
	// ReLU-shaped data (r linear in x) has no exact scale: the residual
	// stays visibly non-zero, which the polish's check turns into a failure.
	XP := mat.NewDense(p, d, nil)
	r := make([]float64, p)
	v := make([]float64, d)
	v[0] = 1
	for q := 0; q < p; q++ {
		row := XP.RawRowView(q)
		for j := range row {
			row[j] = rng.NormFloat64()
		}
		row[0] = math.Abs(row[0]) + 0.1
		r[q] = dot(row, v)
	}
	if a, _, rel, err := expScale(XP, r); err == nil {
		t.Errorf("linear r fitted as e^x − 1 (a = %.1e, residual %.1e), want an error", a, rel)
	}
	// Convex but not exponential (r = t²): no scale fits.
	for q := 0; q < p; q++ {
		r[q] = r[q] * r[q]
	}
	if _, _, rel, err := expScale(XP, r); err == nil && rel < 1e-6 {
		t.Errorf("r = t² fitted as e^x − 1 with residual %.1e", rel)
	}
}

func TestActivationBadInput(t *testing.T) {
	in := newActInstance(t, 5, synth.TwoLayerConfig{D: 6, K: 2, M: 3}, 5000, nn.ReLU, false, synth.Noise{})
	for _, act := range []nn.Activation{"tanh", "relupow2.0", "relupow-1", nn.Identity} {
		if _, err := Fit(context.Background(), in.X, in.Y, Options{Activation: act}); !errors.Is(err, ErrInput) {
			t.Errorf("activation %q: err %v, want ErrInput", act, err)
		}
		if _, _, err := SolveU(in.X, in.Y, in.V, act); !errors.Is(err, ErrInput) {
			t.Errorf("SolveU %q: err %v, want ErrInput", act, err)
		}
	}
	// e^x − 1 overflow: a row of norm 1000 overflows on most samples.
	big := mat.DenseCopyOf(in.V)
	big.Scale(1000, big)
	if _, _, err := SolveU(in.X, in.Y, big, nn.RectExp); !errors.Is(err, ErrInput) {
		t.Errorf("overflowing e^x − 1: err %v, want ErrInput", err)
	}
	if _, err := Refine(context.Background(), in.X, in.Y, big, in.U, nn.RectExp, 5, nil); !errors.Is(err, ErrInput) {
		t.Errorf("overflowing e^x − 1 in Refine: err %v, want ErrInput", err)
	}
}

// The noisy route with φ = x² and e^x − 1: signs, least squares and (for
// e^x − 1, always) the refinement get close to the truth at 1% noise.
func TestNoisyActivations(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 10, K: 3, M: 5, CondV: 2}
	for _, act := range []nn.Activation{nn.RectPow(2), nn.RectExp} {
		in := newActInstance(t, 9, cfg, 25000, act, act == nn.RectExp, synth.Noise{Kind: synth.NoiseGaussian, Level: 0.01})
		res, err := Fit(context.Background(), in.X, in.Y, Options{Activation: act, Seed: 1, Hidden: 3, Refine: true})
		if err != nil {
			t.Fatal(err)
		}
		eV, eU := canonicalError(in.teacher, res.Model)
		if res.Route != RouteNoisy || eV > 0.02 || eU > 0.02 {
			t.Errorf("%s: route %s, errors V %.2e U %.2e, residual %.2e", act, res.Route, eV, eU, res.Certificate.Residual)
		}
		t.Logf("%s: errors V %.1e U %.1e, residual %.2e", act, eV, eU, res.Certificate.Residual)
	}
}
