package depth2

import (
	"context"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

type benchInstance struct {
	X, Y    *mat.Dense
	teacher *nn.Depth2
}

func newBenchInstance(b *testing.B, d, m, n int) benchInstance {
	b.Helper()
	rng := synth.NewRand(1)
	t, err := synth.Depth2Teacher(synth.Depth2Config{D: d, M: m}, rng)
	if err != nil {
		b.Fatal(err)
	}
	X, _ := synth.GaussianInputs(n, d, nil, rng)
	Y, _, _ := synth.Depth2Data(t, X, synth.Noise{}, rng)
	net, _ := nn.Depth2FromMLP(t)
	return benchInstance{X: X, Y: Y, teacher: net}
}

// BenchmarkEstimateMoments is the moment stage at the size
// TestAcceptance20Seeds checks (d = 10, m = 5, n = 1e6, orders ≤ 4 in k = 5
// dimensions, both halves). Flops: residualising on [1, x] n·11² ≈ 1.2e8 (+ a
// solve); T̂_2 2·n·d² = 2e8; residualising on the 21 Hermite features of
// degree ≤ 2 in k = 5 n·21² ≈ 4.4e8; the moments 2·n·21·21 ≈ 8.8e8
// (tensor.HermiteMoments). Floor ≈ 1.7e9 flops ≈ 0.15 s at ~12 GFLOP/s of
// pure-Go GEMM on 2 cores.
func BenchmarkEstimateMoments(b *testing.B) {
	in := newBenchInstance(b, 10, 5, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := EstimateMoments(context.Background(), in.X, in.Y, MomentOptions{MaxOrder: 4, Dim: 5}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1_000_000*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkNormalEquations is one full-data Levenberg–Marquardt iteration's
// JᵀJ at d = 10, m = 5, n = 1e6 with the affine term: P = m(d+1) + (m+1) +
// d = 71 parameters, n = 1e6: SYRK fills one triangle, n·P(P+1)/2 ≈ 2.6e9
// multiply-adds ≈ 5e9 flops, floor ≈ 0.4 s at ~12 GFLOP/s.
func BenchmarkNormalEquations(b *testing.B) {
	in := newBenchInstance(b, 10, 5, 1_000_000)
	net := in.teacher.Clone()
	net.C = []float64{0}
	net.L = mat.NewDense(1, 10, nil)
	l := newLayout(net)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		accumulate(in.X, in.Y, net, l, true)
	}
}

// BenchmarkFit is the whole learner at d = 10, m = 5, n = 1e6: moments,
// Algorithm 6, Algorithm 5's least squares (QR of an n×16 matrix, ≈ 5e8
// flops), the subsample refinement and one full-data pass.
func BenchmarkFit(b *testing.B) {
	in := newBenchInstance(b, 10, 5, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: 5, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Certificate.Met {
			b.Fatalf("not exact: %s", res.Reason)
		}
	}
}
