package extract

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// refine brings a network whose units are right to a few digits (what the
// search leaves from a float32 oracle) to float32 accuracy, and drops a
// misplaced copy of a unit, which would otherwise make the least-squares
// problem degenerate and stall it.
func TestRefineDropsCopyAndRestoresPrecision(t *testing.T) {
	const d, m, p = 30, 6, 10
	teacherNet, truth := depth2Teacher(t, d, m, p, 3)
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
	got, before, after, err := e.refine(context.Background(), start, refineSteps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("units %d → %d, residual %.1e → %.1e, %d queries", m+1, got.Hidden(), before, after, e.diag.QueriesRefine)
	if got.Hidden() != m || after > 1e-6 {
		t.Errorf("units %d (want %d), residual %.1e → %.1e (want ≤ 1e-6)", got.Hidden(), m, before, after)
	}
}

// One Gauss–Newton step must take a network whose parameters are off by
// 1e-4 relative most of the way to the oracle when many units share few
// outputs (m ≫ p): their weight rows are coupled through AᵀA, along
// which CGLS with a diagonal scaling crawls; the preconditioner mixes the
// units' rows by the Cholesky factor of (AᵀA)∘(DᵀD).
func TestGaussNewtonCoupledUnits(t *testing.T) {
	const d, m, p = 40, 32, 2
	_, truth := depth2Teacher(t, d, m, p, 5)
	start := truth.Clone()
	rng := synth.NewRand(8)
	for _, v := range [][]float64{start.W.RawMatrix().Data, start.B, start.A.RawMatrix().Data, start.C} {
		for i := range v {
			v[i] *= 1 + 1e-4*rng.NormFloat64()
		}
	}
	X, _ := synth.GaussianInputs(4*(m*(d+1)+p*(m+1))/p, d, nil, synth.NewRand(9))
	Y := truth.Forward(X)
	before := certify.RelResidual(Y, start.Forward(X))
	after := certify.RelResidual(Y, gaussNewton(start, X, Y).Forward(X))
	t.Logf("residual %.1e → %.1e after one step", before, after)
	if after > 1e-2*before {
		t.Errorf("one Gauss–Newton step took the residual from %.1e to %.1e; want a reduction by 100 or more", before, after)
	}
}

// perturbedUnits returns net's hidden units as unit records (rows of unit
// norm, output columns scaled to match), every entry moved by rel
// relative, without unit skip (−1: none).
func perturbedUnits(net *nn.Depth2, rel float64, skip int, seed uint64) []unit {
	rng := synth.NewRand(seed)
	var us []unit
	for i := 0; i < net.Hidden(); i++ {
		if i == skip {
			continue
		}
		w := mat.Row(nil, i, net.W)
		nw := 0.0
		for _, v := range w {
			nw += v * v
		}
		nw = math.Sqrt(nw)
		a := mat.Col(nil, i, net.A)
		for j := range w {
			w[j] = w[j]/nw + rel*rng.NormFloat64()/math.Sqrt(float64(len(w)))
		}
		for o := range a {
			a[o] *= nw * (1 + rel*rng.NormFloat64())
		}
		us = append(us, newUnitRec(w, net.B[i]/nw, a, rel, w))
	}
	return us
}

// The search's trial fit ends it when the units found are all there is,
// although their line residual is far above the search's tolerance (each
// known to a few digits only, from a float32 oracle), and does not when a
// unit is missing.
func TestTrialFitEndsSearchWhenUnitsComplete(t *testing.T) {
	const d, m, p = 30, 6, 4
	teacherNet, truth := depth2Teacher(t, d, m, p, 11)
	for _, skip := range []int{-1, 2} {
		e := newExtractor(d, Options{Seed: 1}, &counted{f: float32Oracle(teacherNet), d: d, p: p})
		e.noiseMed, e.eta = 1e-7, 1e-5
		e.units = perturbedUnits(truth, 1e-3, skip, 4)
		e.found = len(e.units)
		fitted, err := e.trialFit(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := skip < 0; fitted != want {
			t.Errorf("unit %d missing: trial fit ended the search: %v, want %v", skip, fitted, want)
		}
	}
}

// From a float32 oracle a unit can be read twice, the second reading off
// by more than its expected error and often with the other orientation;
// the copy is dropped (the polished record kept), while two units whose
// hyperplanes are well apart both stay.
func TestDedupeNearCopyFromCoarseOracle(t *testing.T) {
	const d = 20
	rng := synth.NewRand(2)
	w := make([]float64, d)
	for j := range w {
		w[j] = rng.NormFloat64()
	}
	u := newUnitRec(w, 0.3, []float64{1, 2}, 1e-6, w)
	u.polished = true
	// The copy: the other orientation, the normal off by 0.02, b̂ by 0.04.
	wc := make([]float64, d)
	for j := range wc {
		wc[j] = -w[j]/math.Sqrt(dotf(w, w)) + 0.02*rng.NormFloat64()/math.Sqrt(d)
	}
	c := newUnitRec(wc, -0.3+0.04, []float64{-1, -2}, 1e-6, wc)
	other := newUnitRec(mat.Col(nil, 0, mat.NewDense(d, 1, perturb(w, rng))), 1.5, []float64{1, 0}, 1e-6, w)
	e := newExtractor(d, Options{}, &counted{d: d, p: 2})
	e.noiseMed = 1e-7
	e.units = []unit{c, other, u}
	e.dedupe()
	if len(e.units) != 2 || !e.units[0].polished {
		t.Errorf("%d units after dedupe (want 2, the polished record kept first): %+v", len(e.units), e.units)
	}
}

// perturb returns w plus a random vector of the same norm.
func perturb(w []float64, rng interface{ NormFloat64() float64 }) []float64 {
	out := make([]float64, len(w))
	n := math.Sqrt(dotf(w, w) / float64(len(w)))
	for j := range w {
		out[j] = w[j] + n*rng.NormFloat64()
	}
	return out
}

// depth2Teacher returns a d-m-p network at PyTorch's initialisation and
// its one-hidden-layer form.
func depth2Teacher(t *testing.T, d, m, p int, seed uint64) (*nn.MLP, *nn.Depth2) {
	t.Helper()
	net, err := nn.NewMLP([]int{d, m, p}, seed)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := nn.Depth2FromMLP(net)
	if err != nil {
		t.Fatal(err)
	}
	return net, truth
}

// With more unit records than the width given, refine drops the record a
// few hundredths off a unit found twice, not the unit's own record nor
// another unit: of two records of one unit, the output layer's
// least-squares fit misses the worse one least.
func TestRefineDropsNearCopyToTheWidth(t *testing.T) {
	const d, m, p = 30, 8, 5
	teacherNet, truth := depth2Teacher(t, d, m, p, 4)
	rng := synth.NewRand(9)
	start := truth.Clone()
	// Records of unit 3 off by 0.05 and of unit 5 off by 0.2, each with
	// half its unit's output column.
	for _, c := range []struct {
		src int
		off float64
	}{{3, 0.05}, {5, 0.2}} {
		w := append([]float64(nil), truth.W.RawRowView(c.src)...)
		norm := math.Sqrt(dotf(w, w))
		for i := range w {
			w[i] += c.off * norm / math.Sqrt(d) * rng.NormFloat64()
		}
		a := mat.Col(nil, c.src, truth.A)
		for o := range a {
			a[o] /= 2
			start.A.Set(o, c.src, a[o])
		}
		start = withUnit(start, w, truth.B[c.src], a)
	}
	e := &extractor{d: d, o: &counted{f: float32Oracle(teacherNet), d: d}, rng: synth.NewRand(1), opt: Options{Hidden: m}}
	// No Gauss–Newton steps: the records kept are the drop's alone.
	got, _, after, err := e.refine(context.Background(), start, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("units %d → %d, residual %.1e", start.Hidden(), got.Hidden(), after)
	if got.Hidden() != m || after > 1e-6 {
		t.Fatalf("units %d (want %d), residual %.1e (want ≤ 1e-6)", got.Hidden(), m, after)
	}
	for j := 0; j < m; j++ {
		w := truth.W.RawRowView(j)
		best := 1.0
		for k := 0; k < m; k++ {
			g := got.W.RawRowView(k)
			best = math.Min(best, 1-dotf(w, g)/math.Sqrt(dotf(w, w)*dotf(g, g)))
		}
		if best > 1e-9 {
			t.Errorf("unit %d: nearest record 1−cos %.1e", j, best)
		}
	}
}

// withUnit returns net with one more hidden unit (w, b) whose output
// column is a.
func withUnit(net *nn.Depth2, w []float64, b float64, a []float64) *nn.Depth2 {
	m, d, p := net.Hidden(), net.In(), net.Out()
	out := &nn.Depth2{W: mat.NewDense(m+1, d, nil), B: append(append([]float64(nil), net.B...), b), A: mat.NewDense(p, m+1, nil), C: append([]float64(nil), net.C...)}
	out.W.Slice(0, m, 0, d).(*mat.Dense).Copy(net.W)
	out.W.SetRow(m, w)
	out.A.Slice(0, p, 0, m).(*mat.Dense).Copy(net.A)
	out.A.SetCol(m, a)
	return out
}

// Units the search missed are grown on the residual of the units found
// and polished with them: a float32 oracle's 12-unit network whose
// records lack two units, the others off by 1e-3, and hold one record
// between two units (dropped first, dropUnbent), ends with all 12 units
// at float32 accuracy; the plain polish of the same records cannot
// (the units found move to absorb the missing ones).
func TestRefineGrownRecoversMissingUnits(t *testing.T) {
	const d, m, p = 30, 12, 10
	teacherNet, truth := depth2Teacher(t, d, m, p, 4)
	rng := synth.NewRand(3)
	start := withoutUnit(withoutUnit(truth, 7), 2)
	for _, v := range [][]float64{start.W.RawMatrix().Data, start.B, start.A.RawMatrix().Data, start.C} {
		for i := range v {
			v[i] *= 1 + 1e-3*rng.NormFloat64()
		}
	}
	between := make([]float64, d)
	floats.AddTo(between, truth.W.RawRowView(4), truth.W.RawRowView(5))
	start = withUnit(start, between, (truth.B[4]+truth.B[5])/2, mat.Col(nil, 3, start.A))
	// The width given (spare grown units dropped to it) and not given
	// (spare units dropped while the fit does not miss them).
	for _, hidden := range []int{m, 0} {
		newE := func() *extractor {
			return &extractor{d: d, o: &counted{f: float32Oracle(teacherNet), d: d}, rng: synth.NewRand(1), opt: Options{Hidden: hidden, Seed: 1}}
		}
		_, _, plain, err := newE().refine(context.Background(), start, refineSteps)
		if err != nil {
			t.Fatal(err)
		}
		e := newE()
		got, before, after, err := e.refineGrown(context.Background(), start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Hidden %d: plain polish: residual %.1e; grown (%d units, %d records dropped): %.1e → %.1e", hidden, plain, e.diag.Grown, e.diag.Unbent, before, after)
		if e.diag.Unbent != 1 {
			t.Errorf("Hidden %d: %d records dropped as unbent, want the one between units 4 and 5", hidden, e.diag.Unbent)
		}
		if got.Hidden() != m || after > 1e-6 {
			t.Fatalf("Hidden %d: grown polish: %d units (want %d), residual %.1e (want ≤ 1e-6)", hidden, got.Hidden(), m, after)
		}
		for i := 0; i < m; i++ {
			w := truth.W.RawRowView(i)
			best := 1.0
			for k := 0; k < m; k++ {
				g := got.W.RawRowView(k)
				best = math.Min(best, 1-math.Abs(dotf(w, g))/math.Sqrt(dotf(w, w)*dotf(g, g)))
			}
			if best > 1e-8 {
				t.Errorf("Hidden %d: unit %d: 1 − cos %.1e to the nearest unit found (want ≤ 1e-8)", hidden, i, best)
			}
		}
		if plain < 1e-4 {
			t.Errorf("Hidden %d: the plain polish reached %.1e without the missing units: the case does not test growing", hidden, plain)
		}
	}
}

// Two records of one hyperplane whose output columns cancel (twins the
// polish can leave behind a float32 oracle) compute nothing together but
// each much alone: mergeTwins makes them one idle unit, keeping the
// network's function, and the polish drops it.
func TestRefineMergesCancellingTwins(t *testing.T) {
	const d, m, p = 30, 6, 10
	teacherNet, truth := depth2Teacher(t, d, m, p, 3)
	rng := synth.NewRand(11)
	start := &nn.Depth2{W: mat.NewDense(m+2, d, nil), B: make([]float64, m+2), A: mat.NewDense(p, m+2, nil), C: append([]float64(nil), truth.C...)}
	for j := 0; j < m; j++ {
		start.W.SetRow(j, truth.W.RawRowView(j))
		start.B[j] = truth.B[j]
		start.A.SetCol(j, mat.Col(nil, j, truth.A))
	}
	for _, v := range [][]float64{start.W.RawMatrix().Data[:m*d], start.B[:m], start.A.RawMatrix().Data, start.C} {
		for i := range v {
			v[i] *= 1 + 1e-3*rng.NormFloat64()
		}
	}
	// The twins: one hyperplane, the second record at twice the scale,
	// output columns c and −c/2.
	for k := 0; k < d; k++ {
		w := rng.NormFloat64()
		start.W.Set(m, k, w)
		start.W.Set(m+1, k, 2*w)
	}
	start.B[m], start.B[m+1] = 0.3, 0.6
	for o := 0; o < p; o++ {
		c := rng.NormFloat64()
		start.A.Set(o, m, c)
		start.A.Set(o, m+1, -c/2)
	}

	merged, n := mergeTwins(start)
	X, _ := synth.GaussianInputs(500, d, nil, synth.NewRand(5))
	if n != 1 || merged.Hidden() != m+1 || certify.RelResidual(start.Forward(X), merged.Forward(X)) > 1e-12 {
		t.Fatalf("mergeTwins: %d merged, %d units, function moved by %.1e", n, merged.Hidden(), certify.RelResidual(start.Forward(X), merged.Forward(X)))
	}
	if again, n := mergeTwins(truth); n != 0 || again.Hidden() != m {
		t.Errorf("the teacher's own units merged: %d", n)
	}

	e := &extractor{d: d, o: &counted{f: float32Oracle(teacherNet), d: d}, rng: synth.NewRand(1)}
	got, before, after, err := e.refine(context.Background(), start, refineSteps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("units %d → %d, residual %.1e → %.1e", m+2, got.Hidden(), before, after)
	if got.Hidden() != m || after > 1e-6 {
		t.Errorf("units %d (want %d), residual %.1e → %.1e (want ≤ 1e-6)", got.Hidden(), m, before, after)
	}
}

// A last stage whose polish drops a record that was no unit, leaving
// fewer units than the width given, searches on (lastStage) and finds
// the missing unit; with Options.MaxLines given it keeps to those lines
// and stays short.
func TestLastStageSearchesOnWhenPolishDropsARecord(t *testing.T) {
	const d, m, p = 30, 6, 4
	teacherNet, truth := depth2Teacher(t, d, m, p, 11)
	for _, maxLines := range []int{0, 1} {
		opt := Options{Seed: 1, Hidden: m, MaxLines: maxLines}
		if err := opt.defaults(); err != nil {
			t.Fatal(err)
		}
		e := newExtractor(d, opt, &counted{f: float32Oracle(teacherNet), d: d, p: p})
		e.noiseMed, e.eta = 1e-7, 1e-5
		e.units = perturbedUnits(truth, 1e-3, 2, 4)
		// A record no query reaches: its hyperplane far from every
		// Gaussian point, its output column the size of a unit's.
		w := make([]float64, d)
		w[0] = 1
		e.units = append(e.units, newUnitRec(w, -50, e.units[0].a, 1e-3, w))
		e.found = len(e.units)
		last, _, err := e.lastStage(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		want := m
		if maxLines > 0 {
			want = m - 1
		}
		if last.Hidden() != want {
			t.Errorf("MaxLines %d: %d units after the last stage, want %d", maxLines, last.Hidden(), want)
		}
		if maxLines == 0 && e.diag.RefineAfter > e.stopTol() {
			t.Errorf("the stage's polish leaves %.1e > %.1e", e.diag.RefineAfter, e.stopTol())
		}
	}
}
