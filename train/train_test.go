package train

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// The back-propagated gradient matches central finite differences of the
// loss for every weight and bias of a ReLU MLP.
func TestGradientFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m, _ := nn.NewMLP([]int{5, 7, 6, 4}, 3)
	x := testutil.RandDense(rng, 9, 5)
	labels := []int{0, 1, 2, 3, 0, 1, 2, 3, 3}
	idx := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	ws := newWorkspace(m, 9)
	ws.gradient(m, x, idx, func(z, g *mat.Dense, idx []int) (float64, int) {
		return nn.SoftmaxCrossEntropy(z, labels, g), 0
	})
	loss := func() float64 { return nn.SoftmaxCrossEntropy(m.Forward(x), labels, nil) }
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
func TestMLPLearnsAndIsDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	teacher, _ := nn.NewMLP([]int{10, 16, 3}, 99)
	x := testutil.RandDense(rng, 2000, 10)
	labels := teacher.Predict(x)
	run := func() (*nn.MLP, *Result) {
		m, _ := nn.NewMLP([]int{10, 32, 3}, 1)
		res, err := MLP(context.Background(), m, x, labels, Options{Epochs: 15, BatchSize: 64, LearningRate: 3e-3, Seed: 7,
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

func TestMLPBadInput(t *testing.T) {
	m, _ := nn.NewMLP([]int{3, 4, 2}, 1)
	x := mat.NewDense(5, 3, nil)
	ctx := context.Background()
	cases := []struct {
		name   string
		x      *mat.Dense
		labels []int
		o      Options
	}{
		{"label range", x, []int{0, 1, 2, 0, 1}, Options{}},
		{"label count", x, []int{0, 1}, Options{}},
		{"width", mat.NewDense(5, 4, nil), []int{0, 1, 0, 1, 0}, Options{}},
		{"lr", x, []int{0, 1, 0, 1, 0}, Options{LearningRate: -1}},
		{"schedule", x, []int{0, 1, 0, 1, 0}, Options{Schedule: "step"}},
	}
	for _, c := range cases {
		if _, err := MLP(ctx, m, c.x, c.labels, c.o); !errors.Is(err, ErrInput) {
			t.Errorf("%s: got %v, want ErrInput", c.name, err)
		}
	}
	if _, err := nn.NewMLP([]int{3}, 0); !errors.Is(err, ErrInput) {
		t.Errorf("NewMLP with one size: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := MLP(cctx, m, x, []int{0, 1, 0, 1, 0}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
