package compress

import (
	"context"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// Work counts (flops) for one 10000×784 → 512 layer, X̌ = X:
//   qr route:   TSQR 2md² ≈ 12.3 G, R·W 2d²d2 ≈ 0.6 G, SVD of the 785×512
//               whitened target via its 512×512 Gram (≈ 0.4 G + a serial
//               eigendecomposition).
//   gram route: XᵀX 2md² ≈ 12.3 G (as a parallel GEMM), Cholesky d³/3, rest as qr.
// With X̌ ≠ X (sequential layers after the first) add 4md·d2 ≈ 16 G for Qᵀ·Ỹ
// (qr) or 2md·d2 ≈ 8 G for X̌ᵀỸ (gram).

func benchLayer(b *testing.B, route Route, seq bool) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := testutil.RandDense(rng, 10000, 784)
	w := testutil.RandDense(rng, 784, 512)
	p := Problem{W: w, Bias: make([]float64, 512), Act: nn.ReLU, X: x}
	if seq {
		p.Xc = testutil.RandDense(rng, 10000, 784)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.y = nil
		if _, err := FitLayer(p, MethodData, LayerOptions{Route: route}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFitLayer10000x784x512QR(b *testing.B)      { benchLayer(b, RouteQR, false) }
func BenchmarkFitLayer10000x784x512Gram(b *testing.B)    { benchLayer(b, RouteGram, false) }
func BenchmarkFitLayer10000x784x512QRSeq(b *testing.B)   { benchLayer(b, RouteQR, true) }
func BenchmarkFitLayer10000x784x512GramSeq(b *testing.B) { benchLayer(b, RouteGram, true) }

// BenchmarkCompressFashionMLP is the acceptance benchmark: sequential
// data-driven compression of a 784-512-256-10 ReLU MLP to 10% of its
// parameters with 10 000 Fashion-MNIST calibration images (the network's
// weights are a short training run's; time barely depends on them). Skips
// without the data set.
func BenchmarkCompressFashionMLP(b *testing.B) {
	net, calib := benchFashionMLP(b)
	for _, route := range []Route{RouteAuto, RouteQR, RouteGram} {
		b.Run(string(route), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := CompressMLP(context.Background(), net, calib, Options{Keep: 0.1, Sequential: true, Layer: LayerOptions{Route: route}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompressFashionMLPSmallBudget times the small-budget pipeline on
// the same network: keep 0.05, sequential, the global or the
// measured sensitivity allocation, then 30 epochs of distillation (the
// documented `relurec compress --distill 30`); the target is under 30 s on
// 2 cores.
func BenchmarkCompressFashionMLPSmallBudget(b *testing.B) {
	net, calib := benchFashionMLP(b)
	for _, alloc := range []Allocation{AllocGlobal, AllocSensitivity} {
		b.Run(string(alloc)+"-distill30", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				o := Options{Keep: 0.05, Sequential: true, Allocation: alloc, Distill: DistillOptions{Epochs: 30}}
				if _, err := CompressMLP(context.Background(), net, calib, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchFashionMLP is the benchmarks' 784-512-256-10 network after one epoch
// on 2000 Fashion-MNIST images, and 10 000 calibration images. It skips
// without the data set.
func benchFashionMLP(b *testing.B) (*nn.MLP, *mat.Dense) {
	if err := dataio.FashionMNISTAvailable(""); err != nil {
		b.Skipf("Fashion-MNIST not installed: %v", err)
	}
	tr, err := dataio.LoadFashionMNIST("", "train")
	if err != nil {
		b.Fatal(err)
	}
	net, _ := nn.NewMLP([]int{784, 512, 256, 10}, 1)
	small := tr.Head(2000)
	if _, err := train.MLP(context.Background(), net, small.X, small.Labels, train.Options{Epochs: 1}); err != nil {
		b.Fatal(err)
	}
	return net, tr.Head(10000).X
}
