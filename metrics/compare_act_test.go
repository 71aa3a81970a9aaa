package metrics

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// CompareTwoLayer with rectified activations: x² compares up to s² scaling,
// e^x − 1 only up to permutation (its row norms are part of the function).
func TestCompareTwoLayerActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func(r, c int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		for i := range m.RawMatrix().Data {
			m.RawMatrix().Data[i] = rng.NormFloat64()
		}
		return m
	}
	V, U := rnd(3, 5), rnd(4, 3)
	// A permuted copy with rows scaled by s and columns by s^{−deg}.
	variant := func(act nn.Activation, deg float64) *nn.MLP {
		V2, U2 := mat.NewDense(3, 5, nil), mat.NewDense(4, 3, nil)
		for j, p := range []int{2, 0, 1} {
			s := 0.5 + float64(j)
			row := mat.Row(nil, p, V)
			for a := range row {
				row[a] *= s
			}
			V2.SetRow(j, row)
			col := mat.Col(nil, p, U)
			for a := range col {
				col[a] *= math.Pow(s, -deg)
			}
			U2.SetCol(j, col)
		}
		return nn.NewTwoLayerAct(V2, U2, act)
	}
	for _, act := range []nn.Activation{nn.RectPow(2), nn.RectPow(0.5)} {
		deg, _ := act.Homogeneity()
		e, err := CompareTwoLayer(nn.NewTwoLayerAct(V, U, act), variant(act, deg))
		if err != nil || e.MaxRelErr > 1e-14 {
			t.Errorf("%s: same function up to s^%g scaling: %+v, %v", act, deg, e, err)
		}
		if e, _ := CompareTwoLayer(nn.NewTwoLayerAct(V, U, act), variant(act, 1)); e.MaxColErrU < 0.1 {
			t.Errorf("%s: degree-1 scaling is a different network but error %g", act, e.MaxColErrU)
		}
	}
	exp := nn.NewTwoLayerAct(V, U, nn.RectExp)
	if e, err := CompareTwoLayer(exp, variant(nn.RectExp, 0)); err != nil || e.MaxRowErrV < 0.1 {
		t.Errorf("reluexp: rescaled rows must count as an error: %+v, %v", e, err)
	}
	same := variant(nn.RectExp, 0)
	// Undo the scaling: only the permutation is left.
	for j, s := range []float64{0.5, 1.5, 2.5} {
		row := same.Layers[0].Weight.RawRowView(j)
		for a := range row {
			row[a] /= s
		}
	}
	if e, err := CompareTwoLayer(exp, same); err != nil || e.MaxRelErr > 1e-14 || e.Perm[0] != 1 {
		t.Errorf("reluexp: permuted copy: %+v, %v", e, err)
	}
	if _, err := CompareTwoLayer(exp, nn.NewTwoLayer(V, U)); !errors.Is(err, ErrNotTwoLayer) {
		t.Errorf("different activations: err %v, want ErrNotTwoLayer", err)
	}
}
