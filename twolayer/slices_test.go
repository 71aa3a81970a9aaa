package twolayer

import (
	"context"
	"math"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/tensor"
)

// The start's slices (monomial sums, channel sums combined from the shared
// base) agree with tensor.HermiteSlices on the weights red·θ, for order 4
// and order 3, for a later pass that reuses the base, and give the same
// bits at any GOMAXPROCS.
func TestHermiteSlicesMatchTensor(t *testing.T) {
	ctx := context.Background()
	const n, k, p = 5000, 4, 6
	rng := synth.NewRand(7)
	Z, err := synth.GaussianInputs(n, k, nil, rng)
	if err != nil {
		t.Fatal(err)
	}
	red := mat.NewDense(n, k, nil)
	for i := range red.RawMatrix().Data {
		red.RawMatrix().Data[i] = math.Max(rng.NormFloat64(), 0) + 0.3*rng.NormFloat64()
	}
	thetas := mat.NewDense(k, p, nil)
	for i := range thetas.RawMatrix().Data {
		thetas.RawMatrix().Data[i] = rng.NormFloat64()
	}
	for _, order := range []int{4, 3} {
		cs := make([]tensor.Contraction, p)
		for i := range cs {
			cs[i] = contraction(order, (i+1)%p, randUnit(k, rng), randUnit(k, rng))
		}
		S := mat.NewDense(n, p, nil)
		S.Mul(red, thetas)
		want, err := tensor.HermiteSlices(ctx, Z, S, cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		mo := &startMoments{z: Z, red: red}
		var first []*mat.SymDense
		for pass, procs := range []int{1, 3, 1} {
			old := runtime.GOMAXPROCS(procs)
			got, err := mo.hermiteSlices(ctx, thetas, cs, nil)
			runtime.GOMAXPROCS(old)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				var diff mat.Dense
				diff.Sub(got[i], want[i])
				if e := mat.Norm(&diff, math.Inf(1)) / mat.Norm(want[i], math.Inf(1)); e > 1e-12 {
					t.Errorf("order %d, pass %d, slice %d: relative difference %.1e from tensor.HermiteSlices", order, pass, i, e)
				}
				if first != nil && !mat.Equal(got[i], first[i]) {
					t.Errorf("order %d, pass %d (GOMAXPROCS %d), slice %d: bits differ from the first pass", order, pass, procs, i)
				}
			}
			if first == nil {
				first = got
			}
		}
	}
}
