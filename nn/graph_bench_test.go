package nn

import (
	"os"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// BenchmarkGraphForwardMixer times the forward pass of the Fashion-MNIST
// mixer of bench/mixer_fashion.py (RELUREC_MIXER names its ONNX file) on
// 1000 images: 2.34 M multiply-adds each, 2.3 GFLOP, ~0.15 s at pure
// Go's 16 GFLOP/s.
func BenchmarkGraphForwardMixer(b *testing.B) {
	path := os.Getenv("RELUREC_MIXER")
	if path == "" {
		b.Skip("RELUREC_MIXER not set")
	}
	g, err := LoadGraphONNX(path)
	if err != nil {
		b.Fatal(err)
	}
	x := mat.NewDense(1000, g.In(), nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = float64(i%255) / 255
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.Forward(x)
	}
}
