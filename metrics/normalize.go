package metrics

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// UnitRows returns copies of the weights of a two-layer network m with the
// rows of V (the first layer) scaled to unit length and the columns of U (the
// second layer) scaled to keep ReLU(X·Vᵀ)·Uᵀ unchanged: the positive-scaling
// symmetry resolved the way every result is reported. Zero (or NaN-norm) rows
// are left as they are. m must have at least two layers.
func UnitRows(m *nn.MLP) (v, u *mat.Dense) {
	v = mat.DenseCopyOf(m.Layers[0].Weight)
	u = mat.DenseCopyOf(m.Layers[1].Weight)
	k, _ := v.Dims()
	for i := 0; i < k; i++ {
		s := mat.Norm(v.RowView(i), 2)
		if s == 0 || math.IsNaN(s) {
			continue
		}
		row := v.RawRowView(i)
		for j := range row {
			row[j] /= s
		}
		col := mat.Col(nil, i, u)
		for r := range col {
			u.Set(r, i, col[r]*s)
		}
	}
	return v, u
}
