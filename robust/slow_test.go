//go:build slow

package robust

import (
	"math"
	"testing"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/synth"
)

// meanError is the mean of ‖ĉ − μc*‖ over trials at one setting, with the
// oracle threshold (Theorem 4's λ) or the MAD rule.
func meanError(t *testing.T, seed uint64, trials int, cfg synth.RobustConfig, oracle bool) float64 {
	t.Helper()
	mu := ScaleMoments(density.Gaussian{Mean: 0, Std: 0.5}).Mu
	sum := 0.0
	for tr := 0; tr < trials; tr++ {
		in, err := synth.RobustData(cfg, synth.NewRand(seed+uint64(tr)*7919))
		if err != nil {
			t.Fatal(err)
		}
		opt := Options{}
		if oracle {
			opt = Options{Rule: RuleOracle, OracleZW: oracleZW(in, mu)}
		}
		r, err := Recover(in.A, in.V.RawRowView(0), opt)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Certificate.Met {
			t.Fatalf("certificate not met: %+v", r.Certificate)
		}
		sum += errTo(r.C, mu, in.C.RawRowView(0))
	}
	return sum / float64(trials)
}

func fitSlope(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += math.Log(x[i]) / float64(len(x))
		my += math.Log(y[i]) / float64(len(x))
	}
	var sxy, sxx float64
	for i := range x {
		sxy += (math.Log(x[i]) - mx) * (math.Log(y[i]) - my)
		sxx += (math.Log(x[i]) - mx) * (math.Log(x[i]) - mx)
	}
	return sxy / sxx
}

// S1: with k and s fixed the log–log slope of the error against d is −½
// within 0.1 for d ≥ 4000; the ratio to √((k+s)log d/d) stays bounded.
// Run: go test -tags slow -run DSlope ./robust/
func TestDSlope(t *testing.T) {
	ds := []float64{4000, 8000, 16000, 32000}
	var errs []float64
	for _, d := range ds {
		e := meanError(t, 100, 20, synth.RobustConfig{D: int(d), K: 10, N: 1, S: 20, Magnitude: 50, Delta: 0.1}, true)
		errs = append(errs, e)
		ratio := e / math.Sqrt(30*math.Log(d)/d)
		t.Logf("d=%g: error %.4f, ratio to √((k+s)log d/d) %.3f", d, e, ratio)
		if ratio > 1 {
			t.Errorf("d=%g: ratio %.3f to the rate is not bounded by 1", d, ratio)
		}
	}
	if s := fitSlope(ds, errs); s < -0.6 || s > -0.4 {
		t.Errorf("d-slope %.3f outside −0.5 ± 0.1", s)
	} else {
		t.Logf("d-slope %.3f", s)
	}
}

// S2: at fixed d the error grows ∝ √s once s is large (4× s → ≈ 2× error).
func TestSScaling(t *testing.T) {
	e1 := meanError(t, 200, 20, synth.RobustConfig{D: 4000, K: 10, N: 1, S: 160, Magnitude: 50, Delta: 0.1}, true)
	e2 := meanError(t, 200, 20, synth.RobustConfig{D: 4000, K: 10, N: 1, S: 640, Magnitude: 50, Delta: 0.1}, true)
	t.Logf("s=160: %.4f, s=640: %.4f, ratio %.2f", e1, e2, e2/e1)
	if r := e2 / e1; r < 1.5 || r > 2.6 {
		t.Errorf("ratio %.2f for 4× s, want ≈ 2", r)
	}
}

// S3: bounded error as the outlier magnitude grows, with the MAD rule too.
func TestMagnitudeMAD(t *testing.T) {
	var errs []float64
	for _, mag := range []float64{1, 10, 100, 1000} {
		errs = append(errs, meanError(t, 300, 10, synth.RobustConfig{D: 4000, K: 10, N: 1, S: 40, Magnitude: mag, Delta: 0.1}, false))
	}
	t.Logf("MAD rule errors for E = 1, 10, 100, 1000: %v", errs)
	if errs[3] > 2*errs[1] {
		t.Errorf("error grows with the outlier magnitude: %v", errs)
	}
}

// S5: the error grows about linearly with an independent noise level δ
// (once δ dominates the ReLU's own noise), and does not vanish with d when w
// is aligned with A.
func TestNoise(t *testing.T) {
	e2 := meanError(t, 400, 10, synth.RobustConfig{D: 4000, K: 10, N: 1, S: 20, Magnitude: 50, Delta: 2}, false)
	e8 := meanError(t, 400, 10, synth.RobustConfig{D: 4000, K: 10, N: 1, S: 20, Magnitude: 50, Delta: 8}, false)
	t.Logf("independent w: δ=2 %.4f, δ=8 %.4f (ratio %.2f)", e2, e8, e8/e2)
	if r := e8 / e2; r < 2.5 || r > 4.5 {
		t.Errorf("4× δ gives %.2f× error, want ≈ 3–4×", r)
	}
	a1 := meanError(t, 500, 10, synth.RobustConfig{D: 1000, K: 10, N: 1, Delta: 0.5, AlignedNoise: true}, false)
	a16 := meanError(t, 500, 10, synth.RobustConfig{D: 16000, K: 10, N: 1, Delta: 0.5, AlignedNoise: true}, false)
	t.Logf("aligned w: d=1000 %.4f, d=16000 %.4f", a1, a16)
	if a16 < 0.7*a1 {
		t.Errorf("aligned noise: error fell from %.4f to %.4f as d grew 16×; the §2.3 caveat says it should not vanish", a1, a16)
	}
}
