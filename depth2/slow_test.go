//go:build slow

package depth2

import (
	"context"
	"math"
	"sort"
	"testing"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

type slowInstance struct {
	teacher *nn.MLP
	res     *Result
}

func fitInstance(t *testing.T, cfg synth.Depth2Config, n int, noise float64, seed uint64, opt Options) slowInstance {
	t.Helper()
	rng := synth.NewRand(seed)
	teacher, err := synth.Depth2Teacher(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	X, _ := synth.GaussianInputs(n, cfg.D, nil, rng)
	nz := synth.Noise{}
	if noise > 0 {
		nz = synth.Noise{Kind: "gaussian", Level: noise}
	}
	Y, _, _ := synth.Depth2Data(teacher, X, nz, rng)
	opt.Seed = seed
	res, err := Fit(context.Background(), X, Y, opt)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return slowInstance{teacher, res}
}

func maxErr(t *testing.T, truth *nn.MLP, est *nn.Depth2, flip bool) float64 {
	e, err := metrics.CompareDepth2(truth, est.MLP(), flip)
	if err != nil {
		t.Fatal(err)
	}
	if e.Missing > 0 {
		return math.Inf(1)
	}
	return e.MaxErr
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// Exact recovery at d=10, m=5, |b| ≤ 1, |a| ∈ [0.5, 2], n = 1e6, noiseless:
// max parameter error ≤ 1e-6 after refinement on ≥ 19 of 20 seeds.
// go test -tags slow -run Acceptance20 ./depth2/ (≈ 3 min)
func TestAcceptance20Seeds(t *testing.T) {
	hits := 0
	for seed := uint64(1); seed <= 20; seed++ {
		in := fitInstance(t, synth.Depth2Config{D: 10, M: 5}, 1_000_000, 0, seed, Options{Hidden: 5})
		em, er := maxErr(t, in.teacher, in.res.Moment, false), maxErr(t, in.teacher, in.res.Model, false)
		t.Logf("seed %d: moment estimate %.2e, refined %.2e", seed, em, er)
		if er <= 1e-6 {
			hits++
		}
	}
	if hits < 19 {
		t.Errorf("%d of 20 seeds within 1e-6, want ≥ 19", hits)
	}
}

// Overcomplete from samples (ℓ = 2): d = 4, m = 7, n = 1e6.
func TestOvercompleteFromSamples(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		in := fitInstance(t, synth.Depth2Config{D: 4, M: 7, MinSeparation: 0.3}, 1_000_000, 0, seed, Options{Hidden: 7})
		if e := maxErr(t, in.teacher, in.res.Model, false); e > 1e-6 {
			t.Errorf("seed %d: refined error %.2e (%s)", seed, e, in.res.Reason)
		}
	}
}

// [ATV21, Theorem 3.1] in practice: the moment estimate's parameter error falls with
// N (roughly like N^{-1/2} once the ranks are right).
func TestConsistency(t *testing.T) {
	var med []float64
	for _, n := range []int{100_000, 1_000_000} {
		var errs []float64
		for seed := uint64(1); seed <= 5; seed++ {
			in := fitInstance(t, synth.Depth2Config{D: 5, M: 3}, n, 0, seed, Options{Hidden: 3, Route: "moments"})
			errs = append(errs, maxErr(t, in.teacher, in.res.Moment, false))
		}
		med = append(med, medianOf(errs))
	}
	t.Logf("median moment-estimate error: %.3g at 1e5, %.3g at 1e6", med[0], med[1])
	if med[1] > 0.6*med[0] {
		t.Errorf("error did not fall: %.3g → %.3g (N^-1/2 predicts ×0.32)", med[0], med[1])
	}
}

// Claims 21 and 22: with biases ±4 the moments miss units, yet Algorithm
// 5's network (≤ m′ + 2 units when saved) has a small L2 error, which falls
// with N on noisy data.
func TestImproper(t *testing.T) {
	in := fitInstance(t, synth.Depth2Config{D: 8, M: 4, Biases: []float64{4, -4, 4, -4}}, 500_000, 0, 1, Options{Hidden: 4, Route: "improper"})
	found := len(in.res.Diagnostics.Recovery.Units)
	rel := relL2Of(t, in.teacher, in.res.Model)
	t.Logf("|b| = 4: %d units found, Algorithm 5 relative L2 error %.2e", found, rel)
	if rel > 0.05 {
		t.Errorf("improper relative L2 error %.3g > 0.05", rel)
	}
	if units := in.res.Model.MLP().Layers[0].Out(); units > found+2 {
		t.Errorf("saved improper network has %d units, want ≤ m′+2 = %d", units, found+2)
	}
	var l2 []float64
	for _, n := range []int{30_000, 300_000} {
		var v []float64
		for seed := uint64(1); seed <= 3; seed++ {
			in := fitInstance(t, synth.Depth2Config{D: 6, M: 3}, n, 0.1, seed, Options{Hidden: 3, Route: "improper"})
			v = append(v, relL2Of(t, in.teacher, in.res.Model))
		}
		l2 = append(l2, medianOf(v))
	}
	t.Logf("noisy improper relative L2 error: %.3g at 3e4, %.3g at 3e5", l2[0], l2[1])
	if l2[1] > 0.7*l2[0] {
		t.Errorf("improper L2 error did not fall with N: %.3g → %.3g", l2[0], l2[1])
	}
}

func relL2Of(t *testing.T, truth *nn.MLP, est *nn.Depth2) float64 {
	l2, err := metrics.L2Depth2(truth, est.MLP())
	if err != nil {
		t.Fatal(err)
	}
	zero := est.Clone()
	zero.A.Zero()
	zero.C = nil
	zero.L = nil
	norm, err := metrics.L2Depth2(truth, zero.MLP())
	if err != nil {
		t.Fatal(err)
	}
	return math.Sqrt(l2 / norm)
}

// With label noise the refined parameter error falls like n^{-1/2}.
func TestNoisyRate(t *testing.T) {
	ns := []int{20_000, 80_000, 320_000}
	var logN, logE []float64
	for _, n := range ns {
		var errs []float64
		for seed := uint64(1); seed <= 3; seed++ {
			in := fitInstance(t, synth.Depth2Config{D: 6, M: 3}, n, 0.1, seed, Options{Hidden: 3})
			errs = append(errs, maxErr(t, in.teacher, in.res.Model, false))
		}
		logN = append(logN, math.Log(float64(n)))
		logE = append(logE, math.Log(medianOf(errs)))
	}
	slope := (logE[2] - logE[0]) / (logN[2] - logN[0])
	t.Logf("log-log slope %.2f", slope)
	if slope > -0.35 || slope < -0.7 {
		t.Errorf("log-log slope %.2f, want ≈ −0.5", slope)
	}
}
