package compress

import (
	"fmt"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// Factored is a rank-r affine map in the row convention of the paper
// (samples are rows): y = (x·A + InBias)·B + Bias, with A d×r and B r×d2.
// InBias (length r) is non-nil only for the "augment" bias mode, where the
// bias lives inside the low-rank product as the last row of the augmented
// [W; bᵀ] ([ZS25, §1.1]); Bias (length d2) is the dense output bias, nil when the
// layer has none.
//
// In PyTorch terms it is nn.Sequential(nn.Linear(d, r, bias=InBias≠nil),
// nn.Linear(r, d2, bias=Bias≠nil)) with weights Aᵀ and Bᵀ: see Layers.
type Factored struct {
	A, B   *mat.Dense
	InBias []float64
	Bias   []float64
}

// Rank is r, the inner dimension.
func (f Factored) Rank() int { _, r := f.A.Dims(); return r }

// Dims returns (d, d2): input and output widths.
func (f Factored) Dims() (int, int) {
	d, _ := f.A.Dims()
	_, d2 := f.B.Dims()
	return d, d2
}

// Params is the number of stored parameters: r·(d + d2), plus len(InBias)
// and len(Bias) (TestAccounting).
func (f Factored) Params() int {
	d, d2 := f.Dims()
	return f.Rank()*(d+d2) + len(f.InBias) + len(f.Bias)
}

// Product returns the d×d2 matrix A·B (the layer's weight in row
// convention, Wᵀ in PyTorch's).
func (f Factored) Product() *mat.Dense {
	var p mat.Dense
	p.Mul(f.A, f.B)
	return &p
}

// EffectiveBias returns the bias of the equivalent dense map: InBias·B +
// Bias (zeros when both are nil).
func (f Factored) EffectiveBias() []float64 {
	_, d2 := f.Dims()
	out := make([]float64, d2)
	if f.Bias != nil {
		copy(out, f.Bias)
	}
	if f.InBias != nil {
		for k, c := range f.InBias {
			floats.AddScaled(out, c, f.B.RawRowView(k))
		}
	}
	return out
}

// Apply returns (X·A + InBias)·B + Bias for the rows of x, computing the
// cheap way, (X·A)·B, which costs r·(d + d2) multiply-adds per row.
func (f Factored) Apply(x mat.Matrix) *mat.Dense {
	var t, y mat.Dense
	t.Mul(x, f.A)
	if f.InBias != nil {
		addRowVector(&t, f.InBias)
	}
	y.Mul(&t, f.B)
	if f.Bias != nil {
		addRowVector(&y, f.Bias)
	}
	return &y
}

// Layers returns the two nn.Layers that store f with activation act after
// the second: Linear(d→r) with weight Aᵀ and bias InBias, Identity; then
// Linear(r→d2) with weight Bᵀ and bias Bias, act. This is how a compressed
// layer is saved: two consecutive nn.Sequential Linear modules.
func (f Factored) Layers(act nn.Activation) [2]nn.Layer {
	at := mat.DenseCopyOf(f.A.T())
	bt := mat.DenseCopyOf(f.B.T())
	return [2]nn.Layer{
		{Weight: at, Bias: cloneVec(f.InBias), Act: nn.Identity},
		{Weight: bt, Bias: cloneVec(f.Bias), Act: act},
	}
}

// denseParams is the parameter count of a dense d×d2 layer with or without
// bias.
func denseParams(d, d2 int, bias bool) int {
	p := d * d2
	if bias {
		p += d2
	}
	return p
}

func cloneVec(v []float64) []float64 {
	if v == nil {
		return nil
	}
	return append([]float64(nil), v...)
}

// addRowVector adds v to every row of m.
func addRowVector(m *mat.Dense, v []float64) {
	r, c := m.Dims()
	if len(v) != c {
		panic(fmt.Sprintf("compress: adding a vector of length %d to rows of width %d", len(v), c))
	}
	for i := 0; i < r; i++ {
		floats.Add(m.RawRowView(i)[:c], v)
	}
}
