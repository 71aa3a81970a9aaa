package extract

import (
	"context"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/nn"
)

// rareNet returns a 10-8-6-3 network whose second-layer unit 0 and
// first-layer unit 0 are seldom active together on standard Gaussian
// inputs: the first-layer unit switches at sigmas standard deviations of
// its pre-activation, the second-layer unit is active on about 1 in 100
// inputs.
func rareNet(t *testing.T, sigmas float64) *nn.MLP {
	t.Helper()
	net := deepTeacher(t, []int{10, 8, 6, 3}, 4)
	w := net.Layers[0].Weight.RawRowView(0)
	net.Layers[0].Bias[0] = -sigmas * math.Sqrt(dotf(w, w))
	H := net.Hidden(gaussianRows(20000, 10, 5), 0)
	z := make([]float64, 20000)
	for s := range z {
		z[s] = dotf(net.Layers[1].Weight.RawRowView(0), H.RawRowView(s))
	}
	slices.Sort(z)
	net.Layers[1].Bias[0] = -z[len(z)-len(z)/100]
	// The weight the pair carries, large enough to matter where it acts.
	net.Layers[1].Weight.Set(0, 0, 1)
	return net
}

// jointRows counts the rows of X (nil: none) where second-layer unit 0
// and first-layer unit 0 of net are both active.
func jointRows(net *nn.MLP, X *mat.Dense) int {
	if X == nil {
		return 0
	}
	H0, H1 := net.Hidden(X, 0), net.Hidden(X, 1)
	n, _ := X.Dims()
	got := 0
	for s := 0; s < n; s++ {
		if H0.At(s, 0) > 0 && H1.At(s, 0) > 0 {
			got++
		}
	}
	return got
}

// coverRows gives a pair seldom active together on standard Gaussian
// inputs its coverPerPair rows: from wider Gaussian inputs when they
// reach it (the first unit at 3 standard deviations), by ascent when
// they seldom do (at 10).
func TestCoverRowsReachRarePairs(t *testing.T) {
	for _, sigmas := range []float64{3, 10} {
		net := rareNet(t, sigmas)
		gauss := jointRows(net, gaussianRows(4096, 10, 6))
		C := coverRows(net, 1, nil, 7, 0)
		got := jointRows(net, C)
		t.Logf("%v sigmas: %d of 4096 Gaussian rows, %d cover rows", sigmas, gauss, got)
		if gauss >= coverPerPair {
			t.Fatalf("%v sigmas: the pair is active on %d of 4096 Gaussian inputs: not rare", sigmas, gauss)
		}
		if got < coverPerPair {
			t.Errorf("%v sigmas: the pair is active on %d cover rows, want %d", sigmas, got, coverPerPair)
		}
	}
}

// fitMissing fits a weight whose unit is seldom active with its input on
// Gaussian queries (it acts on none of the fit's), and freshResidual
// sees that weight wrong where a residual on Gaussian queries alone does
// not.
func TestFitMissingRareWeight(t *testing.T) {
	net := rareNet(t, 3)
	r, W := exactLayers(net, 1)
	r.opt.Widths = []int{8, 6}
	teacher := &nn.Depth2{W: W, B: net.Layers[1].Bias, A: net.Layers[2].Weight, C: net.Layers[2].Bias}
	free := make([][]bool, teacher.Hidden())
	for j := range free {
		free[j] = make([]bool, teacher.In())
	}
	free[0][0] = true
	start := teacher.Clone()
	start.W.Set(0, 0, 0)
	got, err := r.fitMissing(context.Background(), 1, start, free)
	if err != nil {
		t.Fatal(err)
	}
	scale := mat.Norm(W.RowView(0), math.Inf(1))
	if d := math.Abs(got.W.At(0, 0)-W.At(0, 0)) / scale; d > 1e-8 {
		t.Errorf("weight %.6g, want %.6g (%.1e of its row's largest off)", got.W.At(0, 0), W.At(0, 0), d)
	}
	wrong := teacher.Clone()
	wrong.W.Set(0, 0, W.At(0, 0)+0.5*scale)
	X := gaussianRows(lastRows(wrong), 10, 8)
	gauss := certify.RelResidual(net.Forward(X), wrong.Forward(r.hidden(X, 1)))
	fresh, err := r.freshResidual(context.Background(), 1, wrong)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("weight off by half its row: residual %.1e on Gaussian queries alone, %.1e fresh", gauss, fresh)
	if fresh < 1e-6 {
		t.Errorf("freshResidual %.1e with the weight off by half its row, want ≥ 1e-6", fresh)
	}
}
