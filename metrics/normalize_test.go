package metrics

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

func TestUnitRowsKeepsTheFunction(t *testing.T) {
	V := mat.NewDense(2, 3, []float64{3, 0, 4, 0, 0, 0})
	U := mat.NewDense(1, 2, []float64{2, 5})
	m := &nn.MLP{Layers: []nn.Layer{{Weight: V, Act: nn.ReLU}, {Weight: U, Act: nn.Identity}}}
	v, u := UnitRows(m)
	if got := mat.Norm(v.RowView(0), 2); math.Abs(got-1) > 1e-15 {
		t.Errorf("row 0 norm %g, want 1", got)
	}
	if u.At(0, 0) != 10 || u.At(0, 1) != 5 || v.At(1, 0) != 0 {
		t.Errorf("U = %v, V row 1 = %v: want U scaled by the row norm, zero rows untouched", mat.Formatted(u), v.RawRowView(1))
	}
	if V.At(0, 0) != 3 || U.At(0, 0) != 2 {
		t.Error("the input network was modified")
	}
}
