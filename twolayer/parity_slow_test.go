//go:build slow

package twolayer

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/relurec/relurec/synth"
)

// The near-floor set of docs/twolayer-vs-pytorch.md ("Measured and not
// taken"): 21 instances at the exact route's sample floor or close to it. The parity
// start certifies every unit of every instance from its first
// decomposition, with start angles below 0.1 rad; the tensor start on the
// same instances is printed for comparison (one second decomposition,
// angles up to 0.30 rad, measured 2026-11-26). Run with:
//
//	go test -tags slow -run NearFloor -v ./twolayer/
func TestParityNearFloor(t *testing.T) {
	cells := []struct {
		cfg   synth.TwoLayerConfig
		n     int
		seeds uint64
	}{
		{synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 5000, 6},
		{synth.TwoLayerConfig{D: 30, K: 10, M: 10}, 20000, 6},
		{synth.TwoLayerConfig{D: 50, K: 10, M: 20}, 20000, 6},
		{synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 100000, 3},
	}
	for _, start := range []StartKind{StartAuto, StartTensor} {
		second, worst := 0, 0.0
		var took time.Duration
		for _, c := range cells {
			for seed := uint64(1); seed <= c.seeds; seed++ {
				in := newInstance(t, seed, c.cfg, c.n, nil, synth.Noise{})
				t0 := time.Now()
				res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: seed, Hidden: c.cfg.K, Route: UseExact, Start: start})
				took += time.Since(t0)
				if err != nil {
					t.Fatalf("%s start, %v n=%d seed %d: %v", start, c.cfg, c.n, seed, err)
				}
				if e := compare(t, in.teacher, res.Model); e.MaxRelErr > 1e-9 {
					t.Errorf("%s start, %v n=%d seed %d: weight error %.1e", start, c.cfg, c.n, seed, e.MaxRelErr)
				}
				worst = max(worst, res.Diagnostics.InitAngleError)
				if len(res.Warnings) > 0 {
					second++
					t.Logf("%s start, %v n=%d seed %d: %q", start, c.cfg, c.n, seed, res.Warnings)
				}
				if start == StartAuto && (res.Diagnostics.Start != "parity" || len(res.Warnings) > 0 || res.Diagnostics.InitAngleError > 0.1) {
					t.Errorf("%v n=%d seed %d: start %q, angle %.3g, warnings %q; want the parity start alone within 0.1 rad", c.cfg, c.n, seed, res.Diagnostics.Start, res.Diagnostics.InitAngleError, res.Warnings)
				}
			}
		}
		t.Logf("%s start: %d of 21 instances needed more than one decomposition, worst start angle %.3g rad, fits %v in all", start, second, worst, took.Round(time.Millisecond))
	}
}

// The exact polish's margin, which sets parityLinearRows: from random
// starts up to ~0.33 rad away from V every unit is certified, at the floor
// and above it. Run with: go test -tags slow -run PolishMargin -v ./twolayer/
func TestPolishMargin(t *testing.T) {
	for _, c := range []struct {
		cfg synth.TwoLayerConfig
		n   int
	}{
		{synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 5000},
		{synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 80000},
		{synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 200000},
	} {
		in := newInstance(t, 1, c.cfg, c.n, nil, synth.Noise{})
		B := basis(t, in.Y, c.cfg.K)
		for _, eps := range []float64{0.05, 0.1, 0.2, 0.3} {
			start := perturbRows(in.V, eps, 3)
			_, reps, err := ExactPolish(context.Background(), in.X, B, start, PolishOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ok := 0
			for _, r := range reps {
				if r.OK {
					ok++
				}
			}
			msg := fmt.Sprintf("d=%d k=%d n=%d: start %.3f rad away: %d of %d units certified", c.cfg.D, c.cfg.K, c.n, worstAngle(in.V, start), ok, c.cfg.K)
			t.Log(msg)
			if ok < c.cfg.K {
				t.Error(msg)
			}
		}
	}
}

// The parity start's accuracy against the tensor start's on the same data,
// worst angle over the units, seeds 1–3 (docs/twolayer.md): about
// 1.1·√(d/n_C) for C regressed on n_C = parityLinearRows samples, and
// closer to V than the tensor start. Run with:
//
//	go test -tags slow -run ParityStartScan -v ./twolayer/
func TestParityStartScan(t *testing.T) {
	for _, c := range []struct {
		cfg synth.TwoLayerConfig
		n   int
	}{
		{synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 5000},
		{synth.TwoLayerConfig{D: 100, K: 5, M: 8}, 5000},
		{synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 80000},
		{synth.TwoLayerConfig{D: 100, K: 20, M: 50}, 200000},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			_, par, ap, at := bothStarts(t, seed, c.cfg, c.n)
			rows := parityLinearRows(c.n, c.cfg.D)
			t.Logf("d=%d k=%d n=%d seed %d: parity %.3f rad (C from %d rows, 1.1·√(d/rows) = %.3f, gap %.1f), tensor %.3f rad", c.cfg.D, c.cfg.K, c.n, seed, ap, rows, 1.1*math.Sqrt(float64(c.cfg.D)/float64(rows)), par.parity.gap, at)
			if ap > 2*1.1*math.Sqrt(float64(c.cfg.D)/float64(rows)) {
				t.Errorf("d=%d k=%d n=%d seed %d: parity start %.3f rad from V", c.cfg.D, c.cfg.K, c.n, seed, ap)
			}
		}
	}
}
