//go:build slow

package twolayer

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

// Reliability of the ICA route at the size of TestICAExactRecovery (d=20,
// k=6, m=10, n=1e5, orthonormal V*): exact on every one of 20 seeds.
// Run with: go test -tags slow -run ICAReliability ./twolayer/
func TestICAReliability(t *testing.T) {
	fails := 0
	for seed := uint64(200); seed < 220; seed++ {
		in := newInstance(t, seed, synth.TwoLayerConfig{D: 20, K: 6, M: 10, CondV: 1}, 100000, nil, synth.Noise{})
		res, err := FitICA(context.Background(), in.X, in.Y, ICAOptions{Options: Options{Seed: seed}})
		if err != nil {
			t.Logf("seed %d: %v", seed, err)
			fails++
			continue
		}
		if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 {
			t.Logf("seed %d: error %.1e", seed, e.MaxRelErr)
			fails++
		}
	}
	if fails > 0 {
		t.Errorf("%d of 20 seeds failed", fails)
	}
}

// TestICAMixingRate ([BJW19, Alg 3]) at larger n: the mixing error keeps
// falling like n^{-1/2} from 2.5e4 to 4e5 (16× n, so ≈ 4× smaller), median of
// 6 seeds.
func TestICAMixingRateLarge(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 20, K: 6, M: 10, CondV: 1}
	med := map[int]float64{}
	for _, n := range []int{25000, 400000} {
		var errs []float64
		for seed := uint64(1); seed <= 6; seed++ {
			in := newInstance(t, 300+seed, cfg, n, nil, synth.Noise{})
			est, err := ICAStart(context.Background(), in.X, in.Y, ICAOptions{Options: Options{Seed: seed}})
			if err != nil {
				t.Fatal(err)
			}
			rel, lo, _ := icaMixingError(t, in, est)
			if lo <= 0 {
				t.Errorf("n=%d seed %d: negative scale", n, seed)
			}
			errs = append(errs, rel)
		}
		med[n] = median(errs)
		t.Logf("n=%d: median error %.4f, √n·median %.2f", n, med[n], med[n]*math.Sqrt(float64(n)))
	}
	if r := med[25000] / med[400000]; r < 2.5 || r > 6.5 {
		t.Errorf("error ratio over 16× n is %.2f, want ≈ 4", r)
	}
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Reliability of the FPT route at n = 4·d·2^k: 100 seeds each of the claim-5
// instance (m=2, k=4 with u and −u), two antipodal pairs with unequal norms
// (m=2, k=5), and a Gaussian 3×8 U*, k inferred. Measured: 0 failures.
func TestFPTReliability(t *testing.T) {
	rng := synth.NewRand(3)
	G := mat.NewDense(3, 8, nil)
	for i := range G.RawMatrix().Data {
		G.RawMatrix().Data[i] = rng.NormFloat64()
	}
	for _, U := range []*mat.Dense{
		planar(t, []float64{0.3, 0.3 + math.Pi, 1.9, 4.4}, []float64{1, 0.5, 2, 1.3}),
		planar(t, []float64{0.3, 0.3 + math.Pi, 1.9, 1.9 + math.Pi, 4.0}, []float64{1, 10, 2, 0.1, 1}),
		G,
	} {
		_, k := U.Dims()
		fails := 0
		for seed := uint64(100); seed < 200; seed++ {
			in := fptInstance(t, seed, 20, U, FPTMinSamples(20, k))
			res, err := FitFPT(context.Background(), in.X, in.Y, FPTOptions{})
			if err != nil {
				t.Logf("k=%d seed %d: %v", k, seed, err)
				fails++
				continue
			}
			if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-10 {
				t.Logf("k=%d seed %d: error %.1e", k, seed, e.MaxRelErr)
				fails++
			}
		}
		if fails > 1 {
			t.Errorf("k=%d: %d of 100 seeds failed", k, fails)
		}
	}
}

// icaScreenMaxIter's measurement: on orthonormal V* the screen's FastICA
// settles in 8–17 iterations (d = 15…100, k = 5…20, 3 seeds each), well
// under the cap. Run with: go test -tags slow -run ICAScreenSettles -v ./twolayer/
func TestICAScreenSettles(t *testing.T) {
	for _, cfg := range []synth.TwoLayerConfig{{D: 15, K: 5, M: 8, CondV: 1}, {D: 20, K: 10, M: 10, CondV: 1}, {D: 20, K: 20, M: 20, CondV: 1}, {D: 50, K: 10, M: 20, CondV: 1}, {D: 100, K: 20, M: 50, CondV: 1}} {
		for seed := uint64(1); seed <= 3; seed++ {
			n := max(minSamples(cfg.D, cfg.K), 30000)
			in := newInstance(t, seed, cfg, n, nil, synth.Noise{})
			p, err := newProblem(in.X, in.Y)
			if err != nil {
				t.Fatal(err)
			}
			red0, err := reduceOutputs(p, 0, "the ICA route", tensorFloor)
			if err != nil {
				t.Fatal(err)
			}
			rows, k := min(n, icaScreenRows(cfg.D)), red0.K
			red := mat.NewDense(rows, k, nil)
			red.Mul(in.Y.Slice(0, rows, 0, cfg.M), red0.V.Slice(0, cfg.M, 0, k))
			est := &ICAEstimate{K: k}
			o := ICAOptions{Options: Options{Seed: seed}.withDefaults(), MaxIter: 1000}
			if err := icaUnmix(context.Background(), in.X.Slice(0, rows, 0, cfg.D).(*mat.Dense), red, o, est, icaScreenTol); err != nil {
				t.Fatal(err)
			}
			t.Logf("d=%d k=%d seed %d: %d iterations, max |cos| %.3g", cfg.D, cfg.K, seed, est.ICAIterations, maxOffDiagCos(est.V))
			if !est.ICAConverged || est.ICAIterations > icaScreenMaxIter*2/3 {
				t.Errorf("d=%d k=%d seed %d: FastICA took %d iterations (converged %v), want well under the cap %d", cfg.D, cfg.K, seed, est.ICAIterations, est.ICAConverged, icaScreenMaxIter)
			}
		}
	}
}
