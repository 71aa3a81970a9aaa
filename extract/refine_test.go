package extract

import (
	"context"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// refine brings a network whose units are right to a few digits (what the
// search leaves from a float32 oracle) to float32 accuracy, and drops a
// misplaced copy of a unit, which would otherwise make the least-squares
// problem degenerate and stall it.
func TestRefineDropsCopyAndRestoresPrecision(t *testing.T) {
	const d, m, p = 30, 6, 10
	teacherNet, err := nn.NewMLP([]int{d, m, p}, 3)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := nn.Depth2FromMLP(teacherNet)
	if err != nil {
		t.Fatal(err)
	}
	// Every parameter off by 1e-3 relative, plus a copy of unit 0 with its
	// hyperplane shifted and a small output column.
	rng := synth.NewRand(7)
	start := &nn.Depth2{W: mat.NewDense(m+1, d, nil), B: make([]float64, m+1), A: mat.NewDense(p, m+1, nil), C: append([]float64(nil), truth.C...)}
	for j := 0; j <= m; j++ {
		src := j % m
		start.W.SetRow(j, truth.W.RawRowView(src))
		start.B[j] = truth.B[src]
		start.A.SetCol(j, mat.Col(nil, src, truth.A))
	}
	start.B[m] += 0.05
	colScale := mat.NewDense(p, 1, nil)
	colScale.Scale(0.003, start.A.ColView(m))
	start.A.SetCol(m, colScale.RawMatrix().Data)
	for _, v := range [][]float64{start.W.RawMatrix().Data, start.B, start.A.RawMatrix().Data, start.C} {
		for i := range v {
			v[i] *= 1 + 1e-3*rng.NormFloat64()
		}
	}
	e := &extractor{d: d, o: &counted{f: float32Oracle(teacherNet), d: d}, rng: synth.NewRand(1)}
	got, before, after, err := e.refine(context.Background(), start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("units %d → %d, residual %.1e → %.1e, %d queries", m+1, got.Hidden(), before, after, e.diag.QueriesRefine)
	if got.Hidden() != m || after > 1e-6 {
		t.Errorf("units %d (want %d), residual %.1e → %.1e (want ≤ 1e-6)", got.Hidden(), m, before, after)
	}
}
