package extract

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/floats"

	"github.com/relurec/relurec/synth"
)

// Records no unit stands behind are dropped before growing, the units
// kept: a float32 oracle's 30-12-10, its twelve units off by 1e-3 in every
// parameter, one record between two units (the jump of both read as one)
// and one unit read twice with its output column split between the copies
// around a large opposite part.
func TestDropUnbentKeepsUnitsOnly(t *testing.T) {
	const d, m, p = 30, 12, 10
	teacherNet, truth := depth2Teacher(t, d, m, p, 4)
	rng := synth.NewRand(3)
	recs := truth.Clone()
	for _, v := range [][]float64{recs.W.RawMatrix().Data, recs.B, recs.A.RawMatrix().Data, recs.C} {
		for i := range v {
			v[i] *= 1 + 1e-3*rng.NormFloat64()
		}
	}
	// Between units 2 and 5.
	w := make([]float64, d)
	floats.AddTo(w, truth.W.RawRowView(2), truth.W.RawRowView(5))
	a := make([]float64, p)
	for o := range a {
		a[o] = truth.A.At(o, 2) + truth.A.At(o, 5)
	}
	recs = withUnit(recs, w, (truth.B[2]+truth.B[5])/2, a)
	// Unit 3 twice: a_3 + v and −v, v orthogonal to a_3, three times as long.
	a3 := make([]float64, p)
	for o := range a3 {
		a3[o] = truth.A.At(o, 3)
	}
	v := make([]float64, p)
	for o := range v {
		v[o] = rng.NormFloat64()
	}
	floats.AddScaled(v, -floats.Dot(v, a3)/floats.Dot(a3, a3), a3)
	floats.Scale(3*floats.Norm(a3, 2)/floats.Norm(v, 2), v)
	copy1 := make([]float64, p)
	floats.AddTo(copy1, a3, v)
	floats.Scale(-1, v)
	recs = withUnit(withoutUnit(recs, 3), truth.W.RawRowView(3), truth.B[3], copy1)
	recs = withUnit(recs, truth.W.RawRowView(3), truth.B[3], v)

	e := &extractor{d: d, o: &counted{f: float32Oracle(teacherNet), d: d}, rng: synth.NewRand(1), opt: Options{Seed: 1}}
	kept, dropped, err := e.dropUnbent(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records: %d dropped, %d kept, %d queries", recs.Hidden(), dropped, kept.Hidden(), e.o.queries)
	// Kept: the eleven units other than unit 3, each once.
	if kept.Hidden() != m-1 || dropped != 3 {
		t.Fatalf("kept %d records, dropped %d; want the %d units other than the split one kept and 3 dropped", kept.Hidden(), dropped, m-1)
	}
	for i := 0; i < m; i++ {
		if i == 3 {
			continue
		}
		wt := truth.W.RawRowView(i)
		best := 1.0
		for j := 0; j < kept.Hidden(); j++ {
			g := kept.W.RawRowView(j)
			best = math.Min(best, 1-floats.Dot(wt, g)/(floats.Norm(wt, 2)*floats.Norm(g, 2)))
		}
		if best > 1e-4 {
			t.Errorf("unit %d dropped (nearest kept record 1−cos %.1e)", i, best)
		}
	}
}
