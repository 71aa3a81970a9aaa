package nn

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

func TestSoftmaxCrossEntropy(t *testing.T) {
	z := mat.NewDense(2, 3, []float64{1, 2, 3, 1000, -1000, 0})
	g := mat.NewDense(2, 3, nil)
	loss := SoftmaxCrossEntropy(z, []int{2, 1}, g)
	// Row 0: log(e+e²+e³) − 3; row 1: 2000 (logit 1000 vs −1000), no overflow.
	want := (math.Log(math.Exp(1)+math.Exp(2)+math.Exp(3)) - 3 + 2000) / 2
	if math.Abs(loss-want) > 1e-9 {
		t.Fatalf("loss %g, want %g", loss, want)
	}
	for i := 0; i < 2; i++ {
		s := 0.0
		for j := 0; j < 3; j++ {
			s += g.At(i, j)
		}
		if math.Abs(s) > 1e-15 {
			t.Fatalf("gradient row %d sums to %g", i, s)
		}
	}
	if math.Abs(g.At(1, 1)+0.5) > 1e-15 || math.Abs(g.At(1, 0)-0.5) > 1e-15 {
		t.Fatalf("saturated gradient %v", g.RawRowView(1))
	}
}

// The back-propagated gradient matches central finite differences of the
// loss for every weight and bias of a ReLU MLP.
func TestGradientFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, _ := NewMLP([]int{5, 7, 6, 4}, 3)
	x := testutil.RandDense(rng, 9, 5)
	labels := []int{0, 1, 2, 3, 0, 1, 2, 3, 3}
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	ws := newWorkspace(m, 9)
	ws.gradient(m, x, idx, func(z, g *mat.Dense, idx []int) (float64, int) {
		return SoftmaxCrossEntropy(z, labels, g), 0
	})
	loss := func() float64 { return SoftmaxCrossEntropy(m.Forward(x), labels, nil) }
	const h = 1e-6
	for li, l := range m.Layers {
		r, c := l.Weight.Dims()
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				v := l.Weight.At(i, j)
				l.Weight.Set(i, j, v+h)
				fp := loss()
				l.Weight.Set(i, j, v-h)
				fm := loss()
				l.Weight.Set(i, j, v)
				fd := (fp - fm) / (2 * h)
				if d := math.Abs(fd - ws.dw[li].At(i, j)); d > 1e-7 {
					t.Fatalf("layer %d weight (%d,%d): backprop %g, finite difference %g", li, i, j, ws.dw[li].At(i, j), fd)
				}
			}
		}
		for j := range l.Bias {
			v := l.Bias[j]
			l.Bias[j] = v + h
			fp := loss()
			l.Bias[j] = v - h
			fm := loss()
			l.Bias[j] = v
			if d := math.Abs((fp-fm)/(2*h) - ws.db[li][j]); d > 1e-7 {
				t.Fatalf("layer %d bias %d off by %g", li, j, d)
			}
		}
	}
}

// A teacher-labelled problem is learnt, and training is deterministic.
func TestTrainLearnsAndIsDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	teacher, _ := NewMLP([]int{10, 16, 3}, 99)
	x := testutil.RandDense(rng, 2000, 10)
	labels := teacher.Predict(x)
	run := func() (*MLP, *TrainResult) {
		m, _ := NewMLP([]int{10, 32, 3}, 1)
		res, err := Train(context.Background(), m, x, labels, TrainOptions{Epochs: 15, BatchSize: 64, LearningRate: 3e-3, Seed: 7,
			Validation: x.Slice(0, 500, 0, 10).(*mat.Dense), ValidationLabels: labels[:500]})
		if err != nil {
			t.Fatal(err)
		}
		return m, res
	}
	a, res := run()
	met, _ := a.Evaluate(x, labels)
	if met.Accuracy < 0.9 {
		t.Fatalf("training accuracy %.3f", met.Accuracy)
	}
	if first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss; !(last < 0.5*first) {
		t.Fatalf("loss went from %g to %g", first, last)
	}
	if res.Epochs[0].Validation == nil {
		t.Fatal("no validation metrics")
	}
	b, _ := run()
	for i := range a.Layers {
		if !mat.Equal(a.Layers[i].Weight, b.Layers[i].Weight) {
			t.Fatal("two runs with the same seed differ")
		}
	}
}

func TestTrainBadInput(t *testing.T) {
	m, _ := NewMLP([]int{3, 4, 2}, 1)
	x := mat.NewDense(5, 3, nil)
	ctx := context.Background()
	cases := []struct {
		name   string
		x      *mat.Dense
		labels []int
		o      TrainOptions
	}{
		{"label range", x, []int{0, 1, 2, 0, 1}, TrainOptions{}},
		{"label count", x, []int{0, 1}, TrainOptions{}},
		{"width", mat.NewDense(5, 4, nil), []int{0, 1, 0, 1, 0}, TrainOptions{}},
		{"lr", x, []int{0, 1, 0, 1, 0}, TrainOptions{LearningRate: -1}},
		{"schedule", x, []int{0, 1, 0, 1, 0}, TrainOptions{Schedule: "step"}},
	}
	for _, c := range cases {
		if _, err := Train(ctx, m, c.x, c.labels, c.o); !errors.Is(err, ErrInput) {
			t.Errorf("%s: got %v, want ErrInput", c.name, err)
		}
	}
	if _, err := NewMLP([]int{3}, 0); !errors.Is(err, ErrInput) {
		t.Errorf("NewMLP with one size: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Train(cctx, m, x, []int{0, 1, 0, 1, 0}, TrainOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestMergeAndRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	v, u := testutil.RandDense(rng, 2, 5), testutil.RandDense(rng, 4, 2)
	pair := Factor(v, u, []float64{1, -1}, []float64{0.5, 0, 0, 2}, ReLU)
	last, _ := NewMLP([]int{4, 3}, 2)
	m := &MLP{Layers: []Layer{pair[0], pair[1], last.Layers[0]}}
	if !m.HasFactored() {
		t.Fatal("HasFactored false")
	}
	if r := m.Ranks(); len(r) != 2 || r[0] != 2 || r[1] != 0 {
		t.Fatalf("ranks %v", r)
	}
	d := m.Merge()
	if len(d.Layers) != 2 || d.HasFactored() {
		t.Fatalf("merged into %d layers", len(d.Layers))
	}
	x := testutil.RandDense(rng, 10, 5)
	var diff mat.Dense
	diff.Sub(m.Forward(x), d.Forward(x))
	if n := mat.Norm(&diff, 2); n > 1e-12 {
		t.Fatalf("merged network differs by %g", n)
	}
	if m.MultiplyAdds() != 2*5+4*2+4*3 {
		t.Fatalf("multiply-adds %d", m.MultiplyAdds())
	}
}
