package nn

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

// The shared test helpers under the names this package's tests use.
var (
	randDense  = testutil.RandDense
	randVec    = testutil.RandVec
	maxRelDiff = testutil.MaxRelDiff
	maxAbs     = testutil.MaxAbs
	maxAbsDiff = testutil.DiffNormInf
)

// randMLP builds a network of the given widths; acts[i] is layer i's
// activation, biases on every other layer.
func randMLP(rng *rand.Rand, widths []int, acts []Activation) *MLP {
	m := &MLP{}
	for i := 0; i+1 < len(widths); i++ {
		l := Layer{Weight: randDense(rng, widths[i+1], widths[i]), Act: acts[i]}
		if i%2 == 1 {
			l.Bias = randVec(rng, widths[i+1])
		}
		m.Layers = append(m.Layers, l)
	}
	return m
}

// naiveForward is the textbook triple loop, one sample at a time.
func naiveForward(m *MLP, x *mat.Dense, last int) *mat.Dense {
	n, _ := x.Dims()
	out := mat.NewDense(n, m.Layers[last].Out(), nil)
	for s := 0; s < n; s++ {
		h := mat.Row(nil, s, x)
		for i := 0; i <= last; i++ {
			l := m.Layers[i]
			z := make([]float64, l.Out())
			for o := range z {
				acc := 0.0
				for j, v := range h {
					acc += l.Weight.At(o, j) * v
				}
				if l.Bias != nil {
					acc += l.Bias[o]
				}
				z[o] = l.Act.Apply(acc)
			}
			h = z
		}
		out.SetRow(s, h)
	}
	return out
}

func TestForwardMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := randMLP(rng, []int{7, 13, 5, 9, 3}, []Activation{ReLU, Identity, ReLU, Identity})
	// n spans several chunks and a partial last chunk.
	x := randDense(rng, 3*forwardChunk+17, 7)
	got := m.Forward(x)
	want := naiveForward(m, x, 3)
	if r, c := got.Dims(); r != 3*forwardChunk+17 || c != 3 {
		t.Fatalf("shape %d×%d", r, c)
	}
	if d := maxRelDiff(got, want); d > 1e-13 {
		t.Fatalf("Forward differs from the naive loop by %g", d)
	}
	for layer := 0; layer < 4; layer++ {
		if d := maxRelDiff(m.Hidden(x, layer), naiveForward(m, x, layer)); d > 1e-13 {
			t.Fatalf("Hidden(%d) differs by %g", layer, d)
		}
	}
	// ReLU layers really clip: some hidden activations are exactly zero.
	h := m.Hidden(x, 0)
	zeros := 0
	for _, v := range h.RawMatrix().Data {
		if v == 0 {
			zeros++
		}
	}
	if zeros == 0 {
		t.Fatal("no ReLU output is zero")
	}
	// A view as input.
	big := randDense(rng, 10, 9)
	view := big.Slice(2, 8, 1, 8).(*mat.Dense)
	if d := maxRelDiff(m.Forward(view), naiveForward(m, view, 3)); d > 1e-13 {
		t.Fatalf("view input differs by %g", d)
	}
}

func TestForwardDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := randMLP(rng, []int{100, 80, 10}, []Activation{ReLU, Identity})
	x := randDense(rng, 5*forwardChunk+3, 100)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	want := m.Forward(x)
	for _, p := range []int{2, 3, 8} {
		runtime.GOMAXPROCS(p)
		got := m.Forward(x)
		for i, v := range got.RawMatrix().Data {
			if math.Float64bits(v) != math.Float64bits(want.RawMatrix().Data[i]) {
				t.Fatalf("GOMAXPROCS=%d: element %d differs", p, i)
			}
		}
	}
}

func TestForwardPanicsOnWidth(t *testing.T) {
	m := NewTwoLayer(mat.NewDense(2, 3, nil), mat.NewDense(1, 2, nil))
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on a 4-column input")
		}
	}()
	m.Forward(mat.NewDense(1, 4, nil))
}

func BenchmarkForward(b *testing.B) {
	// 4096×256 → 256 → 10: about 2·4096·(256·256 + 256·10) ≈ 0.56 GFLOP
	// per call. Measured on the 2-core reference machine with the row
	// kernel (transposedWeights): ~27 ms on both cores.
	rng := rand.New(rand.NewPCG(5, 6))
	m := randMLP(rng, []int{256, 256, 10}, []Activation{ReLU, Identity})
	x := randDense(rng, 4096, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Forward(x)
	}
}
