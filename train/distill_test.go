package train

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// SoftCrossEntropy is a divergence: zero when the student's tempered
// softmax is the target, positive otherwise, and its gradient is the
// derivative of the loss (central differences), for several temperatures.
func TestSoftCrossEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	teacher := testutil.RandDense(rng, 6, 4)
	for _, temp := range []float64{1, 4} {
		_, c := teacher.Dims()
		p := softTargetsAndMeans(teacher, temp).Slice(0, 6, 0, c).(*mat.Dense)
		if l := SoftCrossEntropy(teacher, p, temp, nil); math.Abs(l) > 1e-14 {
			t.Fatalf("T=%g: divergence of the teacher from itself is %g", temp, l)
		}
		z := testutil.RandDense(rng, 6, 4)
		g := mat.NewDense(6, 4, nil)
		l := SoftCrossEntropy(z, p, temp, g)
		if !(l > 0) {
			t.Fatalf("T=%g: divergence %g, want > 0", temp, l)
		}
		const h = 1e-6
		for i := 0; i < 6; i++ {
			for j := 0; j < 4; j++ {
				v := z.At(i, j)
				z.Set(i, j, v+h)
				fp := SoftCrossEntropy(z, p, temp, nil)
				z.Set(i, j, v-h)
				fm := SoftCrossEntropy(z, p, temp, nil)
				z.Set(i, j, v)
				if fd := (fp - fm) / (2 * h); math.Abs(fd-g.At(i, j)) > 1e-8 {
					t.Fatalf("T=%g: gradient [%d,%d] %g, finite difference %g", temp, i, j, g.At(i, j), fd)
				}
			}
		}
	}
}

// A student distilled from a teacher of the same shape on unlabelled
// inputs comes much closer to it on held-out inputs; with the teacher
// itself as the student and training targets that pull it away (noisy
// logits), early stopping on the true held-out logits leaves it untouched.
func TestDistill(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	teacher, _ := nn.NewMLP([]int{8, 16, 3}, 1)
	for _, l := range teacher.Layers {
		l.Weight.Scale(3, l.Weight) // confident teacher
	}
	x, hx := testutil.RandDense(rng, 2000, 8), testutil.RandDense(rng, 500, 8)
	tz, hz := teacher.Forward(x), teacher.Forward(hx)
	student, _ := nn.NewMLP([]int{8, 16, 3}, 2)
	opt := DistillOptions{Options: Options{Epochs: 20, LearningRate: 1e-2, Seed: 1}, Holdout: hx, HoldoutTeacher: hz}
	res, err := Distill(context.Background(), student, x, tz, opt)
	if err != nil {
		t.Fatal(err)
	}
	last := res.Epochs[len(res.Epochs)-1]
	if res.StartHoldoutLoss == nil || last.HoldoutLoss == nil || res.BestEpoch == 0 {
		t.Fatalf("early stopping not reported: %+v", res)
	}
	if !(*last.HoldoutLoss < *res.StartHoldoutLoss/5) {
		t.Fatalf("held-out divergence %g → %g, want at least a 5× drop", *res.StartHoldoutLoss, *last.HoldoutLoss)
	}
	if last.TrainAccuracy < 0.9 {
		t.Fatalf("student agrees with the teacher on %.3f of the training inputs, want ≥ 0.9", last.TrainAccuracy)
	}

	noisy := mat.DenseCopyOf(tz)
	for i := 0; i < 2000; i++ {
		for j := 0; j < 3; j++ {
			noisy.Set(i, j, noisy.At(i, j)+5*rng.NormFloat64())
		}
	}
	same := teacher.Clone()
	res, err = Distill(context.Background(), same, x, noisy, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.BestEpoch != 0 {
		t.Fatalf("a perfect student was replaced by epoch %d", res.BestEpoch)
	}
	for i, l := range same.Layers {
		if !mat.Equal(l.Weight, teacher.Layers[i].Weight) {
			t.Fatalf("layer %d changed although no epoch improved on the start", i)
		}
	}
}

func TestDistillBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	m, _ := nn.NewMLP([]int{4, 5, 3}, 1)
	x := testutil.RandDense(rng, 10, 4)
	good := m.Forward(x)
	cases := map[string]struct {
		teacher *mat.Dense
		opt     DistillOptions
	}{
		"no teacher":           {nil, DistillOptions{}},
		"teacher shape":        {mat.NewDense(10, 2, nil), DistillOptions{}},
		"teacher NaN":          {mat.NewDense(10, 3, append([]float64{math.NaN()}, make([]float64, 29)...)), DistillOptions{}},
		"negative temperature": {good, DistillOptions{Temperature: -1}},
		"holdout alone":        {good, DistillOptions{Holdout: x}},
		"holdout width":        {good, DistillOptions{Holdout: testutil.RandDense(rng, 3, 5), HoldoutTeacher: mat.NewDense(3, 3, nil)}},
		"holdout teacher":      {good, DistillOptions{Holdout: x, HoldoutTeacher: mat.NewDense(9, 3, nil)}},
	}
	for name, c := range cases {
		if _, err := Distill(context.Background(), m, x, c.teacher, c.opt); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", name, err)
		}
	}
}

// Both objectives' gradients are their derivatives (central differences);
// the softmax objective sees a whole-row shift of the logits, which the
// divergence alone does not, and the logits objective is zero only at the
// teacher's logits.
func TestDistillObjectives(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	teacher := testutil.RandDense(rng, 5, 4)
	shifted := mat.DenseCopyOf(teacher)
	for i := 0; i < 5; i++ {
		floats.AddConst(3, shifted.RawRowView(i))
	}
	for _, name := range []Objective{ObjectiveSoftmax, ObjectiveLogits} {
		obj, err := DistillOptions{Temperature: 2, Objective: name}.objective()
		if err != nil {
			t.Fatal(err)
		}
		tg := obj.targets(teacher)
		if l := obj.loss(teacher, tg, nil); math.Abs(l) > 1e-14 {
			t.Fatalf("%s: loss of the teacher itself %g", name, l)
		}
		if l := obj.loss(shifted, tg, nil); !(l > 1) {
			t.Fatalf("%s: a shift of every row by 3 costs %g, want > 1", name, l)
		}
		z := testutil.RandDense(rng, 5, 4)
		g := mat.NewDense(5, 4, nil)
		obj.loss(z, tg, g)
		const h = 1e-6
		for i := 0; i < 5; i++ {
			for j := 0; j < 4; j++ {
				v := z.At(i, j)
				z.Set(i, j, v+h)
				fp := obj.loss(z, tg, nil)
				z.Set(i, j, v-h)
				fm := obj.loss(z, tg, nil)
				z.Set(i, j, v)
				if fd := (fp - fm) / (2 * h); math.Abs(fd-g.At(i, j)) > 1e-8 {
					t.Fatalf("%s: gradient [%d,%d] %g, finite difference %g", name, i, j, g.At(i, j), fd)
				}
			}
		}
	}
	if _, err := (DistillOptions{Objective: "mse"}).objective(); !errors.Is(err, ErrInput) {
		t.Fatalf("unknown objective: %v", err)
	}
}

// A NaN among the training inputs is refused, as it is among the held-out
// ones (accepted, it would make every epoch's loss NaN and keep the start).
func TestDistillRefusesNaNInputs(t *testing.T) {
	m, err := nn.NewMLP([]int{3, 4, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense(6, 3, nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = float64(i%5) - 2
	}
	teacher := m.Forward(x)
	x.Set(2, 1, math.NaN())
	_, err = Distill(context.Background(), m, x, teacher, DistillOptions{Options: Options{Epochs: 1}})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("err = %v, want ErrInput naming the NaN", err)
	}
}
