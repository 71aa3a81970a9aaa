package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

func TestMergeAndRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	v, u := testutil.RandDense(rng, 2, 5), testutil.RandDense(rng, 4, 2)
	pair := Factor(v, u, []float64{1, -1}, []float64{0.5, 0, 0, 2}, ReLU)
	last, _ := NewMLP([]int{4, 3}, 2)
	m := &MLP{Layers: []Layer{pair[0], pair[1], last.Layers[0]}}
	if !m.HasFactored() {
		t.Fatal("HasFactored false")
	}
	if r := m.Ranks(); len(r) != 2 || r[0] != 2 || r[1] != 0 {
		t.Fatalf("ranks %v", r)
	}
	d := m.Merge()
	if len(d.Layers) != 2 || d.HasFactored() {
		t.Fatalf("merged into %d layers", len(d.Layers))
	}
	x := testutil.RandDense(rng, 10, 5)
	var diff mat.Dense
	diff.Sub(m.Forward(x), d.Forward(x))
	if n := mat.Norm(&diff, 2); n > 1e-12 {
		t.Fatalf("merged network differs by %g", n)
	}
	if m.MultiplyAdds() != 2*5+4*2+4*3 {
		t.Fatalf("multiply-adds %d", m.MultiplyAdds())
	}
}

// BalanceFactors keeps the function and equalises, per inner unit, the
// norms of the two factors, however unequal they start.
func TestBalanceFactors(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	first := Layer{Weight: testutil.RandDense(rng, 3, 6), Bias: []float64{1, -2, 3}, Act: Identity}
	first.Weight.Scale(1e3, first.Weight)
	m := &MLP{Layers: []Layer{first, {Weight: testutil.RandDense(rng, 4, 3), Bias: make([]float64, 4), Act: ReLU}, {Weight: testutil.RandDense(rng, 2, 4), Act: Identity}}}
	x := testutil.RandDense(rng, 20, 6)
	before := m.Forward(x)
	m.BalanceFactors()
	after := m.Forward(x)
	var d mat.Dense
	d.Sub(after, before)
	if e := mat.Norm(&d, 2) / mat.Norm(before, 2); e > 1e-14 {
		t.Fatalf("balancing changed the outputs by %g (relative)", e)
	}
	for k := 0; k < 3; k++ {
		a := mat.Norm(m.Layers[0].Weight.RowView(k), 2)
		b := mat.Norm(m.Layers[1].Weight.ColView(k), 2)
		if math.Abs(a-b) > 1e-12*a {
			t.Fatalf("unit %d: factor norms %g and %g", k, a, b)
		}
	}
}
