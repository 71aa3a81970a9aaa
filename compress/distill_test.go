package compress

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/train"
)

// Distillation after the layer fit keeps the parameter count and brings
// the compressed network closer to the original on images it never saw
// (a small Fashion-MNIST MLP at 5% of its parameters); its report is
// consistent (the kept epoch's held-out divergence is below the start's,
// the rows split into training and held-out).
func TestDistillImprovesFidelity(t *testing.T) {
	net, calib, test := smallFashionMLP(t, []int{784, 64, 32, 10})
	base := Options{Method: MethodData, Sequential: true, Keep: 0.05}
	plain, err := CompressMLP(context.Background(), net, calib, base)
	if err != nil {
		t.Fatal(err)
	}
	withD := base
	withD.Distill = DistillOptions{Epochs: 20, Seed: 1}
	dist, err := CompressMLP(context.Background(), net, calib, withD)
	if err != nil {
		t.Fatal(err)
	}
	if dist.Params != plain.Params || len(dist.Model.Layers) != len(plain.Model.Layers) {
		t.Fatalf("distillation changed the network's size: %d vs %d parameters", dist.Params, plain.Params)
	}
	r := dist.Distill
	n, _ := calib.Dims()
	if r == nil || r.TrainRows+r.HoldoutRows != n || r.HoldoutRows != n/10 || r.BestEpoch == 0 || !(r.Divergence < r.StartDivergence) {
		t.Fatalf("distillation report %+v", r)
	}
	ref := net.Forward(test.X)
	fp, _ := metrics.CompareLogits(plain.Model.Forward(test.X), ref, test.Labels)
	fd, _ := metrics.CompareLogits(dist.Model.Forward(test.X), ref, test.Labels)
	t.Logf("test logit error: layer fit %.4f, distilled %.4f; agreement %.4f → %.4f (held-out divergence %.4g → %.4g, epoch %d kept)",
		fp.LogitError, fd.LogitError, fp.Agreement, fd.Agreement, r.StartDivergence, r.Divergence, r.BestEpoch)
	// The objective itself on the test images: the tempered divergence.
	temp := dist.Distill.Temperature
	kl := func(z *mat.Dense) float64 {
		p := mat.NewDense(test.Rows(), 10, nil)
		for i := range test.Rows() {
			row, sum := p.RawRowView(i), 0.0
			for j, v := range ref.RawRowView(i) {
				row[j] = math.Exp(v / temp)
				sum += row[j]
			}
			floats.Scale(1/sum, row)
		}
		return train.SoftCrossEntropy(z, p, temp, nil)
	}
	kp, kd := kl(plain.Model.Forward(test.X)), kl(dist.Model.Forward(test.X))
	ap, _ := plain.Model.Evaluate(test.X, test.Labels)
	ad, _ := dist.Model.Evaluate(test.X, test.Labels)
	t.Logf("test divergence %.4f → %.4f, accuracy %.4f → %.4f", kp, kd, ap.Accuracy, ad.Accuracy)
	if !(kd < 0.9*kp) || !(fd.LogitError < fp.LogitError) || !(ad.Accuracy >= ap.Accuracy) {
		t.Fatalf("distillation did not carry over to the test images: divergence %.4f → %.4f, logit error %.4f → %.4f, accuracy %.4f → %.4f",
			kp, kd, fp.LogitError, fd.LogitError, ap.Accuracy, ad.Accuracy)
	}
	// Distill on its own, after a plain compression, is the same step (plain
	// is distilled in place: it is not read after this).
	if err := Distill(context.Background(), net, plain, calib, withD.Distill); err != nil {
		t.Fatal(err)
	}
	for i, l := range plain.Model.Layers {
		if !mat.Equal(l.Weight, dist.Model.Layers[i].Weight) {
			t.Fatalf("layer %d: Distill after CompressMLP differs from CompressMLP with Options.Distill", i)
		}
	}
	if a, b := plain.Distill, dist.Distill; a.BestEpoch != b.BestEpoch || a.Divergence != b.Divergence || a.Agreement != b.Agreement {
		t.Fatalf("reports differ: %+v vs %+v", a, b)
	}
}

// On a network whose layer fit it cannot improve (a synthetic teacher whose
// sequential refit has ill-conditioned weights of norm ~10²: Adam's steps
// only damage it), early stopping returns the layer fit unchanged.
func TestDistillKeepsLayerFit(t *testing.T) {
	net, x, _ := teacher(5)
	base := Options{Method: MethodData, Sequential: true, Keep: 0.1}
	plain, err := CompressMLP(context.Background(), net, x, base)
	if err != nil {
		t.Fatal(err)
	}
	withD := base
	withD.Distill = DistillOptions{Epochs: 5, Seed: 1}
	dist, err := CompressMLP(context.Background(), net, x, withD)
	if err != nil {
		t.Fatal(err)
	}
	// The premise: no epoch improves on the layer fit here. If a change to
	// the fit or to Adam makes one improve, this instance no longer tests
	// early stopping and must be replaced by one where none does.
	if dist.Distill.BestEpoch != 0 {
		t.Fatalf("distillation improved this teacher (epoch %d kept): the instance no longer tests early stopping; choose one where no epoch improves", dist.Distill.BestEpoch)
	}
	p, d := plain.Model.Forward(x), dist.Model.Forward(x)
	var diff mat.Dense
	diff.Sub(p, d)
	if e := mat.Norm(&diff, 2) / mat.Norm(p, 2); e > 1e-12 {
		t.Fatalf("no epoch was kept, yet the outputs moved by %g (relative)", e)
	}
}

func TestDistillBadOptions(t *testing.T) {
	net, x, _ := teacher(5)
	for name, d := range map[string]DistillOptions{
		"negative epochs":  {Epochs: -1},
		"negative rate":    {Epochs: 1, LearningRate: -1},
		"holdout fraction": {Epochs: 1, HoldoutFraction: 1},
		"temperature":      {Epochs: 1, Temperature: -2},
	} {
		if _, err := CompressMLP(context.Background(), net, x, Options{Keep: 0.5, Distill: d}); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", name, err)
		}
	}
	// A CNN and its calibration data that compress without distillation.
	cnn := tinyCNN(rand.New(rand.NewPCG(1, 2)), 4, 0)
	cx := testutil.RandDense(rand.New(rand.NewPCG(3, 4)), 64, cnn.In())
	if _, err := CompressCNN(context.Background(), cnn, cx, Options{Keep: 0.5}); err != nil {
		t.Fatal(err)
	}
	if _, err := CompressCNN(context.Background(), cnn, cx, Options{Keep: 0.5, Distill: DistillOptions{Epochs: 1}}); !errors.Is(err, ErrInput) {
		t.Errorf("CNN: error %v, want ErrInput", err)
	}
}
