package extract

import (
	"context"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

// float32Oracle evaluates the network in float32 arithmetic, as a float32
// runtime would.
func float32Oracle(net *nn.MLP) Oracle {
	return func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
		n, d := X.Dims()
		W, b, A, c := net.Layers[0].Weight, net.Layers[0].Bias, net.Layers[1].Weight, net.Layers[1].Bias
		m, p := W.RawMatrix().Rows, A.RawMatrix().Rows
		Y := mat.NewDense(n, p, nil)
		h := make([]float32, m)
		for r := 0; r < n; r++ {
			for i := 0; i < m; i++ {
				s := float32(b[i])
				for j := 0; j < d; j++ {
					s += float32(W.At(i, j)) * float32(X.At(r, j))
				}
				h[i] = max(s, 0)
			}
			for o := 0; o < p; o++ {
				s := float32(c[o])
				for i := 0; i < m; i++ {
					s += float32(A.At(o, i)) * h[i]
				}
				Y.Set(r, o, float64(s))
			}
		}
		return Y, nil
	}
}

// An oracle computing in float32 is recognised by its rounding; small
// networks are still extracted, to float32 accuracy, and certified
// against float32's tolerance with a warning.
func TestExtractFloat32Arithmetic(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		net := teacher(t, 20, 5, 3, seed)
		res, err := Extract(context.Background(), float32Oracle(net), 20, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		cmp, err := metrics.CompareDepth2(net, res.Model.MLP(), false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: units %d, queries %d, residual %.1e (tol %.1e), max parameter error %.1e, noise %.1e", seed, res.Units, res.Queries, res.Certificate.Residual, res.Certificate.Tol, cmp.MaxErr, res.Diagnostics.Noise)
		if res.Diagnostics.Noise < 1e-9 || !strings.Contains(strings.Join(res.Warnings, " "), "float32") {
			t.Errorf("noise %.1e, warnings %v: float32 arithmetic not reported", res.Diagnostics.Noise, res.Warnings)
		}
		if !res.Certificate.Met || cmp.MaxErr > 1e-4 || res.Units != 5 {
			t.Errorf("units %d, certificate %+v, max error %.1e", res.Units, res.Certificate, cmp.MaxErr)
		}
	}
}
