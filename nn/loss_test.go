package nn

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
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
