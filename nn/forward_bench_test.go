package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/relurec/relurec/internal/testutil"
)

// BenchmarkForwardKernel is one block of the streamed certificate pass: 16384
// rows through a 100-100-100 network, with the row kernel Forward uses in
// the pure-Go build (kern) and with gonum's matrix multiply (gonum, the
// path of a native BLAS). Compare at -cpu 1.
func BenchmarkForwardKernel(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewTwoLayer(testutil.RandDense(rng, 100, 100), testutil.RandDense(rng, 100, 100))
	x := testutil.RandDense(rng, 16384, 100)
	out := testutil.RandDense(rng, 16384, 100)
	last := len(m.Layers) - 1
	b.Run("kern", func(b *testing.B) {
		wt := m.transposedWeights(last)
		for b.Loop() {
			m.forwardRows(x, out, last, wt)
		}
	})
	b.Run("gonum", func(b *testing.B) {
		for b.Loop() {
			m.forwardRows(x, out, last, nil)
		}
	})
}
