//go:build slow

package twolayer

import (
	"context"
	"math"
	"testing"

	"github.com/relurec/relurec/synth"
)

// Reliability: over 50 random instances at d=20, k=5, m=8, n=1e5, exact
// recovery (≤ 1e-9) on at least 49. Run with: go test -tags slow -run Reliability ./twolayer/
func TestReliability50(t *testing.T) {
	fails := 0
	for seed := uint64(1000); seed < 1050; seed++ {
		in := newInstance(t, seed, synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100000, nil, synth.Noise{})
		res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: seed})
		if err != nil {
			t.Logf("seed %d: %v", seed, err)
			fails++
			continue
		}
		if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 || res.Route != RouteExact {
			t.Logf("seed %d: route %s, error %.1e, %s", seed, res.Route, e.MaxRelErr, res.Reason)
			fails++
		}
	}
	if fails > 1 {
		t.Errorf("%d of 50 instances not exact, want ≤ 1", fails)
	}
}

// Exact recovery at d=30, k=8, m=12, κ(V*) = 3, n = 2e5: max relative
// error ≤ 1e-9.
func TestAcceptanceD30(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		in := newInstance(t, seed, synth.TwoLayerConfig{D: 30, K: 8, M: 12, CondV: 3}, 200000, nil, synth.Noise{})
		res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 {
			t.Errorf("seed %d: error %.1e (%s)", seed, e.MaxRelErr, res.Reason)
		}
	}
}

// [BJW19, Thm 10]: the noisy pipeline's weight error falls like n^{-1/2}.
func TestNoisyRate(t *testing.T) {
	ns := []int{20000, 80000, 320000}
	var logN, logE []float64
	for _, n := range ns {
		med := 0.0
		for seed := uint64(1); seed <= 3; seed++ {
			in := newInstance(t, seed, synth.TwoLayerConfig{D: 10, K: 3, M: 6, CondV: 2}, n, nil, synth.Noise{Kind: "gaussian", Level: 0.1})
			res, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: 3, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			med += math.Log(compare(t, in.teacher, res.Model).MaxRelErr) / 3
		}
		logN = append(logN, math.Log(float64(n)))
		logE = append(logE, med)
	}
	slope := (logE[2] - logE[0]) / (logN[2] - logN[0])
	if slope > -0.35 || slope < -0.7 {
		t.Errorf("log-log slope %.2f, want ≈ −0.5", slope)
	}
}
