//go:build slow

package extract

import (
	"context"
	"math"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/train"
)

// torchInit draws nn.Sequential(Linear(d, m), ReLU, Linear(m, p)) with
// PyTorch's default initialisation (nn.NewMLP: weights and biases
// U(−1/√fan_in, 1/√fan_in)).
func torchInit(d, m, p int, seed uint64) *nn.MLP {
	net, err := nn.NewMLP([]int{d, m, p}, seed)
	if err != nil {
		panic(err)
	}
	return net
}

// TestSlowTorchSized measures extraction at MNIST sizes: 784-64-10 (a small
// MNIST classifier) and 784-128-1 (Carlini et al. 2020's benchmark, ~2^21.5
// queries there).
func TestSlowTorchSized(t *testing.T) {
	for _, c := range []struct{ d, m, p int }{{784, 64, 10}, {784, 128, 1}} {
		for seed := uint64(1); seed <= 3; seed++ {
			net := torchInit(c.d, c.m, c.p, seed)
			start := time.Now()
			res, err := Extract(context.Background(), FromMLP(net), c.d, Options{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			cmp, err := metrics.CompareDepth2(net, res.Model.MLP(), false)
			if err != nil {
				t.Fatal(err)
			}
			dg := res.Diagnostics
			t.Logf("%d-%d-%d seed %d: units %d, lines %d, kinks %d, queries %d = 2^%.2f (search %d, Jacobians %d in %d measurements, %d retried, certificate %d), %d calls, %.1f s, residual %.1e, max parameter error %.1e (W %.1e, b %.1e, A %.1e, c %.1e), warnings %v",
				c.d, c.m, c.p, seed, res.Units, res.Lines, res.Kinks, res.Queries, math.Log2(float64(res.Queries)), dg.QueriesSearch, dg.QueriesJacobian, dg.Jacobians, dg.JacobianRetries, dg.QueriesCert, res.Calls, el.Seconds(), res.Certificate.Residual, cmp.MaxErr, cmp.MaxErrW, cmp.MaxErrB, cmp.MaxErrA, cmp.MaxErrC, res.Warnings)
			if res.Units != c.m || cmp.MaxErr > 1e-8 || !res.Certificate.Met {
				t.Errorf("units %d/%d, max error %.2e, certificate %+v", res.Units, c.m, cmp.MaxErr, res.Certificate)
			}
		}
	}
}

// TestSlowFloat32Wider extracts 200-16-10 at PyTorch's initialisation
// from the Go float32 oracle, the width not given (seeds 1–3): the near-copy
// rule and the trial fit end the search early, all units certified.
func TestSlowFloat32Wider(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		net := torchInit(200, 16, 10, seed)
		start := time.Now()
		res, err := Extract(context.Background(), float32Oracle(net), 200, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("200-16-10 float32 oracle, seed %d: units %d, lines %d, queries %d, %.1f s, certificate %.1e (tol %.1e)",
			seed, res.Units, res.Lines, res.Queries, time.Since(start).Seconds(), res.Certificate.Residual, res.Certificate.Tol)
		if res.Units != 16 || !res.Certificate.Met {
			t.Errorf("seed %d: units %d, certificate %+v", seed, res.Units, res.Certificate)
		}
	}
}

// TestSlowFashionTrained trains 784-64-10 on Fashion-MNIST (train.MLP, Adam,
// 2 epochs), rounds its parameters to float32 (what an ONNX or float32
// safetensors export holds), and extracts it from queries evaluated in
// float64.
func TestSlowFashionTrained(t *testing.T) {
	trainSet, test := loadFashion(t)
	for seed := uint64(1); seed <= 2; seed++ {
		net := torchInit(784, 64, 10, seed)
		if _, err := train.MLP(context.Background(), net, trainSet.X, trainSet.Labels, train.Options{Epochs: 2, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		for _, l := range net.Layers {
			data := l.Weight.RawMatrix().Data
			for i := range data {
				data[i] = float64(float32(data[i]))
			}
			for i := range l.Bias {
				l.Bias[i] = float64(float32(l.Bias[i]))
			}
		}
		acc := accuracy(net, test.X, test.Labels)
		dead := deadUnits(net)
		for _, polish := range []float64{0, -1} {
			start := time.Now()
			res, err := Extract(context.Background(), FromMLP(net), 784, Options{Seed: seed, PolishTol: polish})
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			cmp, err := metrics.CompareDepth2(net, res.Model.MLP(), false)
			if err != nil {
				t.Fatal(err)
			}
			dg := res.Diagnostics
			t.Logf("Fashion-MNIST 784-64-10 seed %d (test accuracy %.3f, %d units never active on 10k Gaussian inputs), PolishTol %g: units %d, lines %d, queries %d = 2^%.2f (search %d, Jacobians %d, %d polished, certificate %d), %.1f s, residual %.1e, max parameter error %.1e (W %.1e, b %.1e, A %.1e, c %.1e), missing %d, warnings %v",
				seed, acc, dead, polish, res.Units, res.Lines, res.Queries, math.Log2(float64(res.Queries)), dg.QueriesSearch, dg.QueriesJacobian, dg.Polished, dg.QueriesCert, el.Seconds(), res.Certificate.Residual, cmp.MaxErr, cmp.MaxErrW, cmp.MaxErrB, cmp.MaxErrA, cmp.MaxErrC, cmp.Missing, res.Warnings)
			if cmp.MaxErr > 1e-8 && polish == 0 || !res.Certificate.Met {
				t.Errorf("max error %.2e, certificate %+v", cmp.MaxErr, res.Certificate)
			}
		}
	}
}

func accuracy(net *nn.MLP, X *mat.Dense, labels []int) float64 {
	Y := net.Forward(X)
	ok := 0
	for i, l := range labels {
		row := Y.RawRowView(i)
		best := 0
		for j := range row {
			if row[j] > row[best] {
				best = j
			}
		}
		if best == l {
			ok++
		}
	}
	return float64(ok) / float64(len(labels))
}

// deadUnits counts hidden units inactive on 10 000 standard Gaussian
// inputs.
func deadUnits(net *nn.MLP) int {
	X, _ := synth.GaussianInputs(10000, net.In(), nil, synth.NewRand(99))
	H := net.Hidden(X, 0)
	n, m := H.Dims()
	dead := 0
	for j := 0; j < m; j++ {
		live := false
		for i := 0; i < n && !live; i++ {
			live = H.At(i, j) > 0
		}
		if !live {
			dead++
		}
	}
	return dead
}

// TestSlowFashionFloat32 trains 784-32-10 on Fashion-MNIST (train.MLP, Adam,
// 2 epochs; seeds 0–2) and extracts it from an oracle computing in float32
// (width not given); it scores argmax agreement and relative logit error on
// the 10 000 test images.
func TestSlowFashionFloat32(t *testing.T) {
	trainSet, test := loadFashion(t)
	for seed := uint64(0); seed <= 2; seed++ {
		net := torchInit(784, 32, 10, seed)
		if _, err := train.MLP(context.Background(), net, trainSet.X, trainSet.Labels, train.Options{Epochs: 2, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		oracle := float32Oracle(net)
		start := time.Now()
		res, err := Extract(context.Background(), oracle, 784, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		Y, _ := oracle(context.Background(), test.X)
		F := res.Model.Forward(test.X)
		worst := 0.0
		n, _ := Y.Dims()
		for i := 0; i < n; i++ {
			y, f := Y.RawRowView(i), F.RawRowView(i)
			num, den := 0.0, 0.0
			for o := range y {
				num += (y[o] - f[o]) * (y[o] - f[o])
				den += y[o] * y[o]
			}
			worst = math.Max(worst, math.Sqrt(num/den))
		}
		agree := argmaxAgreement(Y, F)
		dg := res.Diagnostics
		t.Logf("784-32-10 float32 oracle, seed %d (test accuracy %.3f): units %d, lines %d, queries %d = 2^%.2f (Jacobians %d, least-squares polish %d), %.0f s, certificate %.1e (tol %.1e), refine %.1e → %.1e, test images: argmax agreement %.4f, largest relative logit error %.1e, warnings %v",
			seed, accuracy(net, test.X, test.Labels), res.Units, res.Lines, res.Queries, math.Log2(float64(res.Queries)), dg.QueriesJacobian, dg.QueriesRefine, el.Seconds(), res.Certificate.Residual, res.Certificate.Tol, dg.RefineBefore, dg.RefineAfter, agree, worst, res.Warnings)
		if agree < 1 || worst > 1e-4 || !res.Certificate.Met {
			t.Errorf("seed %d: argmax agreement %.4f, logits %.1e, certificate %+v", seed, agree, worst, res.Certificate)
		}
	}
}

// loadFashion returns Fashion-MNIST's training and test sets, skipping the
// test when the files are not installed.
func loadFashion(t *testing.T) (trainSet, test *dataio.Labeled) {
	t.Helper()
	if err := dataio.FashionMNISTAvailable(""); err != nil {
		t.Skip(err)
	}
	trainSet, err := dataio.LoadFashionMNIST("", "train")
	if err != nil {
		t.Fatal(err)
	}
	test, err = dataio.LoadFashionMNIST("", "test")
	if err != nil {
		t.Fatal(err)
	}
	return trainSet, test
}
