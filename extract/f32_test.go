package extract

import (
	"context"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// float32Oracle evaluates the network (any depth, ReLU hidden layers) in
// float32 arithmetic, as a float32 runtime would: inputs, weights and every
// partial sum rounded to float32.
func float32Oracle(net *nn.MLP) Oracle { return float32Runtime(net, false) }

// batchedFloat32Oracle is float32Oracle with the rounding of a batched
// float32 product: the rows of a batch are summed in one order or another
// by their position, alternating in groups of six (sequentially, or in
// eight interleaved partial sums as a vector kernel does), as PyTorch's
// float32 Linear does through OpenBLAS's AVX2 kernel
// (bench/torch_batch_rounding.py: rows 0–5 and 6–11 of every twelve
// answer one input differently).
func batchedFloat32Oracle(net *nn.MLP) Oracle { return float32Runtime(net, true) }

func float32Runtime(net *nn.MLP, batched bool) Oracle {
	type layer struct {
		w, b []float32
		in   int
		relu bool
	}
	ls := make([]layer, len(net.Layers))
	for k, l := range net.Layers {
		r, c := l.Weight.Dims()
		ly := layer{w: make([]float32, r*c), b: make([]float32, r), in: c, relu: l.Act == nn.ReLU}
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				ly.w[i*c+j] = float32(l.Weight.At(i, j))
			}
			ly.b[i] = float32(l.Bias[i])
		}
		ls[k] = ly
	}
	return func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
		n, d := X.Dims()
		Y := mat.NewDense(n, net.Out(), nil)
		x := make([]float32, d)
		for r := 0; r < n; r++ {
			lanes := 1
			if batched && r%12 >= 6 {
				lanes = 8
			}
			for j := range x {
				x[j] = float32(X.At(r, j))
			}
			h := x
			for _, ly := range ls {
				out := make([]float32, len(ly.b))
				for i := range out {
					row := ly.w[i*ly.in : (i+1)*ly.in]
					s := ly.b[i]
					if lanes == 1 {
						for j, v := range row {
							s += v * h[j]
						}
					} else {
						var part [8]float32
						for j, v := range row {
							part[j%lanes] += v * h[j]
						}
						for _, p := range part {
							s += p
						}
					}
					if ly.relu {
						s = max(s, 0)
					}
					out[i] = s
				}
				h = out
			}
			for o, v := range h {
				Y.Set(r, o, float64(v))
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

// A 100-16-10 network at PyTorch's initialisation served in float32: its
// kinks along a line merge below float32's resolution and its Jacobian
// jumps carry rounding of ≈ 1e-4 relative, so units are found only with
// tolerances from the measured rounding, merged kinks rejected by the
// rank test, misplaced copies dropped after polish, and the last digits
// come from the whole-network least-squares polish. The extraction must
// find all 16 units and reproduce the oracle's logits to float32's
// accuracy on fresh inputs.
func TestExtractFloat32Wide(t *testing.T) {
	const seed = 1
	net, err := nn.NewMLP([]int{100, 16, 10}, seed)
	if err != nil {
		t.Fatal(err)
	}
	oracle := float32Oracle(net)
	res, err := Extract(context.Background(), oracle, 100, Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	X, _ := synth.GaussianInputs(2000, 100, nil, synth.NewRand(seed+100))
	Y, _ := oracle(context.Background(), X)
	F := res.Model.Forward(X)
	rel, agree := certify.RelResidual(Y, F), argmaxAgreement(Y, F)
	t.Logf("units %d, queries %d, certificate %.1e (tol %.1e), logits %.1e relative, argmax agreement %.4f",
		res.Units, res.Queries, res.Certificate.Residual, res.Certificate.Tol, rel, agree)
	// Every unit found: no warning may say that units are missing.
	if res.Units != 16 || !res.Certificate.Met || rel > 1e-5 || agree < 0.999 || strings.Contains(strings.Join(res.Warnings, " "), "missing") {
		t.Errorf("units %d, certificate %+v, logits %.1e relative, agreement %.4f; warnings %v", res.Units, res.Certificate, rel, agree, res.Warnings)
	}
}

// A search cut short (MaxLines) behind a float32 oracle leaves units
// missing; the units grown on the residual of those found (refineGrown)
// stand in for them, and the polish certifies the whole network: 12 of
// 12 units after two lines with the width given (the search finds 7).
// TestRefineGrownRecoversMissingUnits covers the width not given.
func TestExtractFloat32GrowsWhatTheSearchMissed(t *testing.T) {
	const d, m, p = 30, 12, 10
	net, _ := depth2Teacher(t, d, m, p, 4)
	for _, c := range []struct{ lines, hidden int }{{2, m}} {
		res, err := Extract(context.Background(), float32Oracle(net), d, Options{Seed: 1, MaxLines: c.lines, Hidden: c.hidden})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("MaxLines %d, Hidden %d: units %d (%d grown), certificate %.1e, %d queries; warnings %q", c.lines, c.hidden, res.Units, res.Diagnostics.Grown, res.Certificate.Residual, res.Queries, res.Warnings)
		if res.Units != m || res.Diagnostics.Grown == 0 || !res.Certificate.Met || strings.Contains(strings.Join(res.Warnings, " "), "missing") {
			t.Errorf("MaxLines %d, Hidden %d: units %d (want %d), %d grown (want > 0), certificate %+v; warnings %q", c.lines, c.hidden, res.Units, m, res.Diagnostics.Grown, res.Certificate, res.Warnings)
		}
	}
}

// argmaxAgreement is the share of rows where Y and F have their largest
// entry in the same column.
func argmaxAgreement(Y, F *mat.Dense) float64 {
	n, _ := Y.Dims()
	ok := 0
	for i := 0; i < n; i++ {
		if argmax(Y.RawRowView(i)) == argmax(F.RawRowView(i)) {
			ok++
		}
	}
	return float64(ok) / float64(n)
}

func argmax(v []float64) int {
	best := 0
	for j := range v {
		if v[j] > v[best] {
			best = j
		}
	}
	return best
}

// An oracle that reads its inputs in float32 moves a coordinate step h on
// a coordinate of size |x_c| by up to ν·|x_c|: a Jacobian measured with
// steps as requested rather than as read is off by ν·|x_c|/h in every
// column. The steps are rounded to what the oracle reads, so a linear map
// behind such an oracle is measured exactly.
func TestJacobianStepsAsTheOracleReadsThem(t *testing.T) {
	const d, p = 12, 3
	A := mat.NewDense(p, d, nil)
	rng := synth.NewRand(3)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	oracle := func(_ context.Context, X *mat.Dense) (*mat.Dense, error) {
		n, _ := X.Dims()
		X32 := mat.NewDense(n, d, nil)
		for i, v := range X.RawMatrix().Data {
			X32.RawMatrix().Data[i] = float64(float32(v))
		}
		Y := mat.NewDense(n, p, nil)
		Y.Mul(X32, A.T())
		return Y, nil
	}
	e := newExtractor(d, Options{Batch: 1024}, &counted{f: oracle, d: d})
	e.noiseMed, e.eta = 1e-7, 1e-5 // measured float32 rounding
	x := make([]float64, d)
	for j := range x {
		x[j] = 50 + 10*rng.NormFloat64()
	}
	j := &jacJob{x: x, h: 1e-3}
	if err := e.measure(context.Background(), []*jacJob{j}); err != nil {
		t.Fatal(err)
	}
	if !j.ok {
		t.Fatal("the check failed")
	}
	var D mat.Dense
	D.Sub(j.J, A)
	if rel := mat.Norm(&D, 2) / mat.Norm(A, 2); rel > 1e-9 {
		t.Errorf("Jacobian off by %.1e relative; want exact steps (≤ 1e-9)", rel)
	}
}

// A Jacobian jump read from forward differences of a float32 oracle: the
// columns of each Jacobian share the rounding of f at its point, so one
// unit's jump carries a rank-one error along the all-ones input direction
// besides the noise bulk. It must still be read as one unit; a jump with a
// second unit's part in it must still be refused.
func TestUnitFromJumpCommonRoundingOfFx(t *testing.T) {
	const d, m, trials = 784, 32, 8
	net, err := nn.NewMLP([]int{d, m, 10}, 2)
	if err != nil {
		t.Fatal(err)
	}
	W, B := net.Layers[0].Weight, net.Layers[0].Bias
	w0 := mat.Row(nil, 0, W)
	n0 := math.Sqrt(dotf(w0, w0))
	e := newExtractor(d, Options{Batch: 4096}, &counted{f: float32Oracle(net), d: d})
	e.noiseMed, e.eta = 1e-7, 1e-5 // float32 rounding, as measured
	rng := synth.NewRand(5)
	accepted := 0
	for trial := 0; trial < trials; trial++ {
		// A point of unit 0's hyperplane and the points either side of
		// it, off every other unit's hyperplane by far more than a step.
		x := make([]float64, d)
		for far := false; !far; {
			for j := range x {
				x[j] = rng.NormFloat64()
			}
			z := (dotf(w0, x) + B[0]) / n0
			for j := range x {
				x[j] -= z * w0[j] / n0
			}
			far = true
			for k := 1; k < m; k++ {
				wk := W.RawRowView(k)
				far = far && math.Abs(dotf(wk, x)+B[k]) > 0.05*math.Sqrt(dotf(wk, wk))
			}
		}
		side := func(s float64) *jacJob {
			y := make([]float64, d)
			for j := range y {
				y[j] = x[j] + s*0.02*w0[j]/n0
			}
			return &jacJob{x: y, h: 1e-2}
		}
		jp, jm := side(1), side(-1)
		if err := e.measure(context.Background(), []*jacJob{jp, jm}); err != nil {
			t.Fatal(err)
		}
		if !jp.ok || !jm.ok {
			t.Fatalf("trial %d: a Jacobian's check failed", trial)
		}
		var dJ mat.Dense
		dJ.Sub(jp.J, jm.J)
		errJ := jp.errJ + jm.errJ
		if _, _, _, _, ok := unitFromJump(&dJ, w0, errJ, true); ok {
			accepted++
		}
		// Unit 1's jump at 1% of unit 0's: two units, refused.
		a1 := mat.Col(nil, 1, net.Layers[1].Weight)
		w1 := mat.Row(nil, 1, W)
		s := 0.01 * mat.Norm(&dJ, 2) / (math.Sqrt(dotf(a1, a1)) * math.Sqrt(dotf(w1, w1)))
		for o := range a1 {
			row := dJ.RawRowView(o)
			for j := range row {
				row[j] += s * a1[o] * w1[j]
			}
		}
		if _, _, _, _, ok := unitFromJump(&dJ, w0, errJ, true); ok {
			t.Errorf("trial %d: a jump of two units accepted", trial)
		}
	}
	if accepted < trials {
		t.Errorf("%d of %d one-unit jumps accepted; want all", accepted, trials)
	}
}

// Two hidden layers behind a float32 oracle: the first layer's
// hyperplanes sharpened by locating their kinks (refinePlane), the
// orientation tests against the measured rounding, and the whole network
// polished at the end (polishNetwork) to the oracle's precision. The
// seeds are ones where the second layer's search finds its width exactly;
// TestSlowFloat32TwoHiddenLayerShapes counts the others.
func TestExtractFloat32TwoHiddenLayers(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		sizes := []int{40, 12, 8, 5}
		net := deepTeacher(t, sizes, seed)
		res := checkDeepWith(t, net, float32Oracle(net), Options{Seed: 1, Widths: sizes[1 : len(sizes)-1]}, 1e-3)
		if d := res.Diagnostics; !(d.RefineAfter < d.RefineBefore) {
			t.Errorf("%v: the whole-network polish left the residual at %.1e (from %.1e)", sizes, d.RefineAfter, d.RefineBefore)
		}
	}
}

// refinePlane takes a first-layer unit read to 1e-3 (a Jacobian jump
// behind a float32 oracle) to the precision of its located kinks.
func TestRefinePlaneSharpensUnit(t *testing.T) {
	const d = 40
	net := deepTeacher(t, []int{d, 12, 8, 5}, 2)
	e := newExtractor(d, Options{Seed: 3}, &counted{f: float32Oracle(net), d: d})
	e.noiseMed, e.eta = 3e-7, 3e-5
	rng := synth.NewRand(4)
	W, b := net.Layers[0].Weight, net.Layers[0].Bias
	for i := 0; i < 3; i++ {
		w := mat.Row(nil, i, W)
		nw := math.Sqrt(dotf(w, w))
		truth := make([]float64, d)
		for j := range w {
			truth[j] = w[j] / nw
		}
		// A point of the true hyperplane, and the unit read off by 1e-3.
		x := make([]float64, d)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		z := dotf(truth, x) + b[i]/nw
		for j := range x {
			x[j] -= z * truth[j]
		}
		u := unit{w: make([]float64, d), estW: 1e-3}
		for j := range u.w {
			u.w[j] = truth[j] + 1e-3*rng.NormFloat64()/math.Sqrt(d)
		}
		nu := math.Sqrt(dotf(u.w, u.w))
		for j := range u.w {
			u.w[j] /= nu
		}
		u.b = -dotf(u.w, x)
		u.a = []float64{1}
		before := 1 - dotf(u.w, truth)
		ok, err := e.refinePlane(context.Background(), &u, x, 1e-6, planeRadius)
		if err != nil || !ok {
			t.Fatalf("unit %d: refinePlane ok=%v err=%v", i, ok, err)
		}
		after := 1 - math.Abs(dotf(u.w, truth))
		t.Logf("unit %d: 1−cos %.1e → %.1e", i, before, after)
		if after > 1e-9 || math.Abs(math.Abs(u.b)-math.Abs(b[i]/nw)) > 1e-4 {
			t.Errorf("unit %d: 1−cos %.1e → %.1e, b %.6f (want ±%.6f)", i, before, after, u.b, b[i]/nw)
		}
	}
}

// jumpsOutside passes the kinks of units not found yet and screens out
// those of units already found, behind a float32 oracle.
func TestJumpsOutsideScreensKnownUnits(t *testing.T) {
	const d = 30
	net := deepTeacher(t, []int{d, 10, 4}, 5)
	e := newExtractor(d, Options{Seed: 6}, &counted{f: float32Oracle(net), d: d, p: 4})
	e.noiseMed, e.eta = 3e-7, 3e-5
	W, b := net.Layers[0].Weight, net.Layers[0].Bias
	for i := 0; i < 5; i++ { // units 0–4 known, 5–9 not
		w := mat.Row(nil, i, W)
		n := math.Sqrt(dotf(w, w))
		for j := range w {
			w[j] /= n
		}
		e.units = append(e.units, unit{w: w, b: b[i] / n})
	}
	rng := synth.NewRand(7)
	var pairs [][2]*jacJob
	for i := 0; i < 10; i++ {
		// Either side of unit i's hyperplane, along its normal.
		w := mat.Row(nil, i, W)
		n := math.Sqrt(dotf(w, w))
		x := make([]float64, d)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		z := (dotf(w, x) + b[i]) / n
		var pr [2]*jacJob
		for s, off := range []float64{-1e-2, 1e-2} {
			y := make([]float64, d)
			for j := range y {
				y[j] = x[j] + (off-z)*w[j]/n
			}
			pr[s] = &jacJob{x: y, h: 1e-3, scale: []float64{1, 1, 1, 1}}
		}
		pairs = append(pairs, pr)
	}
	out, err := e.jumpsOutside(context.Background(), pairs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o != (i >= 5) {
			t.Errorf("unit %d (known %v): outside %v", i, i < 5, o)
		}
	}
}
