package depth2

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/tensor"
)

// The chunked passes of EstimateMoments agree with the dense products and
// tensor.Residualize they replace, and give the same bits at any
// GOMAXPROCS.
func TestEstimateChunkedPasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 3))
	n, d, p := 9000, 7, 2
	X := testutil.RandDense(rng, n, d)
	net := randomNet(d, 3, []float64{0.1, -0.6, 1.3}, rng)
	S := mat.NewDense(n, p, nil)
	Y := net.Forward(X)
	for i := 0; i < n; i++ {
		S.Set(i, 0, Y.At(i, 0))
		S.Set(i, 1, Y.At(i, 0)*Y.At(i, 0)+0.1*rng.NormFloat64())
	}
	close := func(name string, got, want *mat.Dense, tol float64) {
		t.Helper()
		var diff mat.Dense
		diff.Sub(got, want)
		if r := mat.Norm(&diff, 2) / mat.Norm(want, 2); r > tol {
			t.Errorf("%s: relative difference %.2e", name, r)
		}
	}
	var want mat.Dense
	want.Mul(X.Slice(100, 7000, 0, d).T(), S.Slice(100, 7000, 0, p))
	want.Scale(1/6900.0, &want)
	close("crossMean", crossMean(X, S, make([]float64, p), [2]int{100, 7000}), &want, 1e-14)

	P := mat.NewDense(d, 3, nil)
	for i := range P.RawMatrix().Data {
		P.RawMatrix().Data[i] = rng.NormFloat64()
	}
	want.Reset()
	want.Mul(X, P)
	close("project", project(X, P), &want, 1e-15)

	Z := project(X, P)
	for _, c := range []struct {
		Z      *mat.Dense
		in     inputs
		degree int
	}{{X, newInputs(X, nil), 1}, {Z, newInputs(X, P), 2}} {
		ref := mat.DenseCopyOf(S)
		if _, err := tensor.Residualize(context.Background(), c.Z, ref, c.degree); err != nil {
			t.Fatal(err)
		}
		var first *mat.Dense
		for _, procs := range []int{1, 3} {
			prev := runtime.GOMAXPROCS(procs)
			got, err := residualize(context.Background(), c.in, S, c.degree, nil)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			close("residualize", got, ref, 1e-11)
			if first == nil {
				first = got
			} else if !mat.Equal(first, got) {
				t.Errorf("degree %d: GOMAXPROCS changes the residuals", c.degree)
			}
		}
	}
}
