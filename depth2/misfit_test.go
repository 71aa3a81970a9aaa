package depth2

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// mlpSamples draws n standard Gaussian inputs and the outputs of a
// PyTorch-default network of the given sizes (nn.NewMLP) with its weights
// scaled by wscale.
func mlpSamples(sizes []int, n int, wscale float64, seed uint64) (X, Y *mat.Dense) {
	net, err := nn.NewMLP(sizes, seed)
	if err != nil {
		panic(err)
	}
	for _, l := range net.Layers {
		l.Weight.Scale(wscale, l.Weight)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	X = mat.NewDense(n, sizes[0], nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = rng.NormFloat64()
	}
	return X, net.Forward(X)
}

// Data of a network with two hidden layers: deflation stops at a round
// whose units take too little of the residual, Diagnostics.Misfit says why,
// and the reason says the data are not one hidden layer.
func TestFitMisfitEndsDeflation(t *testing.T) {
	X, Y := mlpSamples([]int{8, 6, 6, 3}, 10_000, 1, 3)
	res, err := Fit(context.Background(), X, Y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Certificate.Met || res.Diagnostics.Misfit == "" || !strings.Contains(res.Reason, "not one hidden layer") {
		t.Fatalf("certificate %+v, misfit %q, reason %q; want not met, a misfit and the reason naming it", res.Certificate, res.Diagnostics.Misfit, res.Reason)
	}
}

// With more units than the moments' dimensions FixSigns cannot run; the
// note says the refinement settles the signs, not "bad input", and the
// answer is exact.
func TestFitSignsLeftToRefinement(t *testing.T) {
	X, Y := mlpSamples([]int{6, 4, 2}, 20_000, 2, 7)
	res, err := Fit(context.Background(), X, Y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certificate.Met {
		t.Fatalf("not certified: %+v", res.Certificate)
	}
	found := false
	for _, w := range res.Warnings {
		if strings.Contains(w, "bad input") {
			t.Errorf("warning %q", w)
		}
		found = found || strings.Contains(w, "signs left to the refinement")
	}
	if !found {
		t.Errorf("no note on the signs FixSigns left: %q", res.Warnings)
	}
}
