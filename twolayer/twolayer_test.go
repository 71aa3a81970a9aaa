package twolayer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// instance is a teacher network with its data.
type instance struct {
	teacher *nn.MLP
	V, U    *mat.Dense
	X, Y    *mat.Dense
}

func newInstance(t testing.TB, seed uint64, cfg synth.TwoLayerConfig, n int, cov *mat.SymDense, noise synth.Noise) instance {
	t.Helper()
	rng := synth.NewRand(seed)
	teacher, err := synth.TwoLayerTeacher(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	X, err := synth.GaussianInputs(n, cfg.D, cov, rng)
	if err != nil {
		t.Fatal(err)
	}
	Y, _, err := synth.TwoLayerData(teacher, X, noise, rng)
	if err != nil {
		t.Fatal(err)
	}
	return instance{teacher: teacher, V: teacher.Layers[0].Weight, U: teacher.Layers[1].Weight, X: X, Y: Y}
}

func compare(t testing.TB, truth, est *nn.MLP) metrics.TwoLayerError {
	t.Helper()
	e, err := metrics.CompareTwoLayer(truth, est)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// [BJW19, Alg 4 + Alg 5]: Alg 4 (order 4) + Alg 5 recover V* and U* exactly
// (max relative weight error ≤ 1e-9, residual ≤ 1e-10) for Gaussian X.
func TestExactRecovery(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		in := newInstance(t, seed, synth.TwoLayerConfig{D: 20, K: 5, M: 8, CondV: 5}, 100000, nil, synth.Noise{})
		res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		e := compare(t, in.teacher, res.Model)
		if res.Route != RouteExact || !res.Certificate.Met || e.MaxRelErr > 1e-9 || res.Certificate.Residual > 1e-10 {
			t.Errorf("seed %d: route %s (%s), certificate %+v, weight error %.2e", seed, res.Route, res.Reason, res.Certificate, e.MaxRelErr)
		}
		if res.Diagnostics.Hidden != 5 || !res.Diagnostics.HiddenInferred {
			t.Errorf("seed %d: hidden %d inferred %v, want 5 inferred", seed, res.Diagnostics.Hidden, res.Diagnostics.HiddenInferred)
		}
	}
}

// [BJW19, Alg 5]: the polished rows do not depend on how accurate the
// start was, nor on its signs.
func TestPolishIndependentOfStart(t *testing.T) {
	in := newInstance(t, 11, synth.TwoLayerConfig{D: 12, K: 4, M: 6, CondV: 3}, 20000, nil, synth.Noise{})
	B := basis(t, in.Y, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	var results []*mat.Dense
	for _, eps := range []float64{1e-8, 1e-4, 1e-2} {
		start := mat.DenseCopyOf(in.V)
		for i := 0; i < 4; i++ {
			row := start.RawRowView(i)
			sign := 1.0
			if rng.IntN(2) == 0 {
				sign = -1
			}
			for j := range row {
				row[j] = sign * (row[j] + eps*rng.NormFloat64()/math.Sqrt(12))
			}
		}
		normalizeRows(start)
		V, reps, err := ExactPolish(context.Background(), in.X, B, start, PolishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range reps {
			if !r.OK {
				t.Fatalf("ε=%g unit %d: %s", eps, i, r.Why)
			}
		}
		if d := testutil.DiffNormInf(V, in.V); d > 1e-10 {
			t.Errorf("ε=%g: polished rows differ from V* by %.1e", eps, d)
		}
		results = append(results, V)
	}
	for i := 1; i < len(results); i++ {
		if d := testutil.DiffNormInf(results[0], results[i]); d > 1e-10 {
			t.Errorf("polish from different starts disagree by %.1e", d)
		}
	}
}

// [BJW19, Thm 6 / Lemma 10]: on the confidently inactive samples
// of the true row, the output span has a null vector (σ_k/σ_1 ≤ 1e-12); on
// those of the flipped row it has none (σ_k/σ_1 ≥ 1e-4).
func TestWrongSignInfeasible(t *testing.T) {
	in := newInstance(t, 12, synth.TwoLayerConfig{D: 15, K: 5, M: 8, CondV: 3}, 30000, nil, synth.Noise{})
	B := basis(t, in.Y, 5)
	n, _ := in.X.Dims()
	for i := 0; i < 5; i++ {
		v := in.V.RawRowView(i)
		for _, sign := range []float64{1, -1} {
			var rows []int
			for q := 0; q < n && len(rows) < 200; q++ {
				x := in.X.RawRowView(q)
				if sign*dot(x, v) < -0.3*math.Sqrt(dot(x, x)) {
					rows = append(rows, q)
				}
			}
			Bn := mat.NewDense(len(rows), 5, nil)
			for j, q := range rows {
				Bn.SetRow(j, B.RawRowView(q))
			}
			_, s, _, err := linalg.ThinSVD(Bn)
			if err != nil {
				t.Fatal(err)
			}
			ratio := s[4] / s[0]
			if sign == 1 && ratio > 1e-12 {
				t.Errorf("unit %d, true sign: σ_k/σ_1 = %.1e, want ≤ 1e-12", i, ratio)
			}
			if sign == -1 && ratio < 1e-4 {
				t.Errorf("unit %d, wrong sign: σ_k/σ_1 = %.1e, want ≥ 1e-4", i, ratio)
			}
		}
	}
}

// [BJW19, Lemma 4]: f(V*X) has rank k once n ≥ 20k.
func TestActivationRank(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		in := newInstance(t, seed, synth.TwoLayerConfig{D: 10, K: 6, M: 6}, 120, nil, synth.Noise{})
		_, s, _, err := linalg.ThinSVD(activations(in.X, in.V))
		if err != nil {
			t.Fatal(err)
		}
		if r := linalg.NumericalRank(s, 1e-10); r != 6 {
			t.Errorf("seed %d: rank %d, want 6", seed, r)
		}
	}
}

// [BJW19, Lemma 8]: P[v_i·x < 0 < v_j·x] = θ_ij/(2π).
func TestSplitProbability(t *testing.T) {
	in := newInstance(t, 3, synth.TwoLayerConfig{D: 8, K: 4, M: 4, CondV: 4}, 200000, nil, synth.Noise{})
	n, _ := in.X.Dims()
	P := mat.NewDense(n, 4, nil)
	P.Mul(in.X, in.V.T())
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			if i == j {
				continue
			}
			count := 0
			for q := 0; q < n; q++ {
				if P.At(q, i) < 0 && P.At(q, j) > 0 {
					count++
				}
			}
			p := math.Acos(mat.Dot(in.V.RowView(i), in.V.RowView(j))) / (2 * math.Pi)
			got := float64(count) / float64(n)
			if se := math.Sqrt(p * (1 - p) / float64(n)); math.Abs(got-p) > 5*se {
				t.Errorf("pair (%d,%d): fraction %.4f, want %.4f ± %.4f", i, j, got, p, 5*se)
			}
		}
	}
}

// The first moment of [BJW19]: (1/n)·Yᵀ·X → U*V*/2 (c₁ = 1/2) with O(n^{-1/2}) error.
func TestFirstMoment(t *testing.T) {
	in := newInstance(t, 5, synth.TwoLayerConfig{D: 6, K: 3, M: 4}, 400000, nil, synth.Noise{})
	errAt := func(n int) float64 {
		var M, want mat.Dense
		M.Mul(in.Y.Slice(0, n, 0, 4).T(), in.X.Slice(0, n, 0, 6))
		M.Scale(1/float64(n), &M)
		want.Mul(in.U, in.V)
		want.Scale(0.5, &want)
		M.Sub(&M, &want)
		return mat.Norm(&M, 2) / mat.Norm(&want, 2)
	}
	big, small := errAt(400000), errAt(25000)
	if big > 0.02 {
		t.Errorf("relative error %.3f at n=4e5, want < 0.02", big)
	}
	if r := small / big; r < 1.5 || r > 10 {
		t.Errorf("error ratio n=2.5e4 vs 4e5 is %.2f, want ≈ 4 (n^{-1/2})", r)
	}
}

// The rectified-Gaussian moments behind [BJW19, Alg 3]: moments of the rectified Gaussian max(g, 0).
func TestRectifiedGaussianMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const n = 2000000
	var s1, s2 float64
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = math.Max(rng.NormFloat64(), 0)
		s1 += xs[i]
	}
	mean := s1 / n
	var m3, m4 float64
	for _, x := range xs {
		d := x - mean
		s2 += d * d
		m3 += d * d * d
		m4 += d * d * d * d
	}
	v := s2 / n
	skew := m3 / n / math.Pow(v, 1.5)
	kurt := m4/n/(v*v) - 3
	for _, c := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"mean", mean, 0.398942, 2e-3}, {"variance", v, 0.340845, 2e-3},
		{"skewness", skew, 1.6406, 2e-2}, {"excess kurtosis", kurt, 2.4076, 0.1},
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s = %.5f, want %.5f ± %g", c.name, c.got, c.want, c.tol)
		}
	}
}

// [BJW19, Thm 9]: under noise the projection test recovers the
// signs of every row.
func TestRecoverSignsUnderNoise(t *testing.T) {
	in := newInstance(t, 21, synth.TwoLayerConfig{D: 10, K: 4, M: 6, CondV: 3}, 40000, nil, synth.Noise{Kind: "gaussian", Level: 0.3})
	rng := rand.New(rand.NewPCG(4, 4))
	start := mat.DenseCopyOf(in.V)
	flips := []float64{1, -1, -1, 1}
	for i := 0; i < 4; i++ {
		row := start.RawRowView(i)
		for j := range row {
			row[j] = flips[i] * (row[j] + 0.05*rng.NormFloat64()/math.Sqrt(10))
		}
	}
	normalizeRows(start)
	V, margins, err := RecoverSigns(context.Background(), in.X, in.Y, start, nn.ReLU)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if c := mat.Dot(V.RowView(i), in.V.RowView(i)); c < 0.9 {
			t.Errorf("unit %d: cos to the truth %.3f after sign recovery (margin %.3f)", i, c, margins[i])
		}
		if margins[i] <= 0 {
			t.Errorf("unit %d: margin %.3f, want > 0", i, margins[i])
		}
	}
}

// Fit must see noise and take the noisy route, say why, and not certify.
func TestNoisyRouteChosen(t *testing.T) {
	in := newInstance(t, 31, synth.TwoLayerConfig{D: 10, K: 3, M: 6, CondV: 2}, 50000, nil, synth.Noise{Kind: "gaussian", Level: 0.1})
	res, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: 3, Seed: 1, Refine: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Route != RouteNoisy || res.Certificate.Met || !strings.Contains(res.Reason, "not exactly rank") {
		t.Fatalf("route %s, reason %q, certificate %+v", res.Route, res.Reason, res.Certificate)
	}
	e := compare(t, in.teacher, res.Model)
	if e.MaxRelErr > 0.1 {
		t.Errorf("noisy weight error %.3f, want < 0.1", e.MaxRelErr)
	}
	if res.Diagnostics.ResidualBeforeRefine < res.Certificate.Residual {
		t.Errorf("refinement raised the residual: %.4f → %.4f", res.Diagnostics.ResidualBeforeRefine, res.Certificate.Residual)
	}
	if _, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: 3, Route: "exact"}); !errors.Is(err, ErrNotExact) {
		t.Errorf("route exact on noisy data: err %v, want ErrNotExact", err)
	}
}

// Remark 3: inputs with a non-identity covariance are whitened for the tensor
// start; the polish works on the raw inputs, so recovery stays exact.
func TestWhitening(t *testing.T) {
	rng := synth.NewRand(77)
	cov := synth.RandomCovariance(12, 10, rng)
	in := newInstance(t, 41, synth.TwoLayerConfig{D: 12, K: 4, M: 6, CondV: 2}, 60000, cov, synth.Noise{})
	res, err := Fit(context.Background(), in.X, in.Y, Options{Seed: 2, Start: StartTensor})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Diagnostics.Whitened {
		t.Error("a covariance with κ = 10 was not detected")
	}
	if e := compare(t, in.teacher, res.Model); res.Route != RouteExact || e.MaxRelErr > 1e-9 {
		t.Errorf("route %s (%s), weight error %.1e", res.Route, res.Reason, e.MaxRelErr)
	}
}

// The same seed gives the same bits at any GOMAXPROCS.
func TestDeterministicAcrossProcs(t *testing.T) {
	in := newInstance(t, 51, synth.TwoLayerConfig{D: 10, K: 3, M: 5, CondV: 2}, 20000, nil, synth.Noise{Kind: "gaussian", Level: 0.05})
	run := func(procs int) *nn.MLP {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		res, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: 3, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		return res.Model
	}
	a, b := run(1), run(4)
	for l := range a.Layers {
		if !mat.Equal(a.Layers[l].Weight, b.Layers[l].Weight) {
			t.Fatalf("layer %d differs between GOMAXPROCS 1 and 4", l)
		}
	}
}

func TestBadInput(t *testing.T) {
	in := newInstance(t, 61, synth.TwoLayerConfig{D: 6, K: 3, M: 4}, 20000, nil, synth.Noise{})
	// Outputs that only see two of the three units' combinations.
	lowRank := mat.NewDense(20000, 4, nil)
	proj := mat.NewDense(4, 4, []float64{1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0})
	lowRank.Mul(in.Y, proj)
	nanX := mat.DenseCopyOf(in.X)
	nanX.Set(17, 3, math.NaN())
	cases := []struct {
		name string
		X, Y *mat.Dense
		opt  Options
		want string
	}{
		{"rows", in.X.Slice(0, 19999, 0, 6).(*mat.Dense), in.Y, Options{}, "X has 19999 rows but Y has 20000"},
		{"nan", nanX, in.Y, Options{}, "X has NaN at row 17, column 3"},
		// k > m is Alg 7's setting (FPT): it fails clearly when the data
		// show fewer units than asked for.
		{"width", in.X, in.Y, Options{Hidden: 5}, "expected k = 5"},
		{"samples", in.X.Slice(0, 500, 0, 6).(*mat.Dense), in.Y.Slice(0, 500, 0, 4).(*mat.Dense), Options{}, "needs n ≥"},
		{"route", in.X, in.Y, Options{Route: "fast"}, "Options.Route must be one of"},
		{"start", in.X, in.Y, Options{Start: "moments"}, "Options.Start must be auto, parity or tensor"},
		{"zero", in.X, mat.NewDense(20000, 4, nil), Options{}, "identically zero"},
	}
	for _, c := range cases {
		_, err := Fit(context.Background(), c.X, c.Y, c.opt)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInput mentioning %q", c.name, err, c.want)
		}
	}
	// Outputs of rank 2 < k = 3 are a network whose U* lacks full column
	// rank, not bad input: the FPT route (Alg 7) recovers it exactly.
	res, err := Fit(context.Background(), in.X, lowRank, Options{Hidden: 3})
	if err != nil || res.Route != RouteFPT || !res.Certificate.Met {
		t.Errorf("rank-deficient outputs: err %v, result %+v", err, res)
	}
}

func TestCancel(t *testing.T) {
	in := newInstance(t, 71, synth.TwoLayerConfig{D: 6, K: 3, M: 4}, 20000, nil, synth.Noise{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Fit(ctx, in.X, in.Y, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// perturbRows returns unit rows within about eps of V's rows.
func perturbRows(V *mat.Dense, eps float64, seed uint64) *mat.Dense {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := mat.DenseCopyOf(V)
	_, d := out.Dims()
	for i, x := range out.RawMatrix().Data {
		out.RawMatrix().Data[i] = x + eps*rng.NormFloat64()/math.Sqrt(float64(d))
	}
	normalizeRows(out)
	return out
}

func basis(t testing.TB, Y *mat.Dense, k int) *mat.Dense {
	t.Helper()
	u, _, _, err := linalg.ThinSVD(Y)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := Y.Dims()
	return mat.DenseCopyOf(u.Slice(0, n, 0, k))
}

// Without Hidden, k comes from the exact rank (noiseless) or from the noise
// floor of Y's singular values (noisy).
func TestInferHidden(t *testing.T) {
	for _, level := range []float64{0, 0.01, 0.1, 0.3} {
		for seed := uint64(1); seed <= 3; seed++ {
			in := newInstance(t, seed, synth.TwoLayerConfig{D: 20, K: 5, M: 8}, 100000, nil, synth.Noise{Kind: "gaussian", Level: level})
			_, s, _, err := linalg.ThinSVD(in.Y)
			if err != nil {
				t.Fatal(err)
			}
			if k, _ := inferHidden(s, 20, 100000, exactRankTol); k != 5 {
				t.Errorf("noise %.2f seed %d: inferred k = %d, want 5 (singular values %.3g)", level, seed, k, s)
			}
		}
	}
}

// k = m: the rank of Y cannot reveal noise, so the certificate decides.
func TestSquareOutputLayer(t *testing.T) {
	clean := newInstance(t, 81, synth.TwoLayerConfig{D: 10, K: 4, M: 4, CondV: 2}, 40000, nil, synth.Noise{})
	res, err := Fit(context.Background(), clean.X, clean.Y, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e := compare(t, clean.teacher, res.Model); res.Route != RouteExact || e.MaxRelErr > 1e-9 {
		t.Errorf("noiseless k = m: route %s (%s), error %.1e", res.Route, res.Reason, e.MaxRelErr)
	}
	noisy := newInstance(t, 81, synth.TwoLayerConfig{D: 10, K: 4, M: 4, CondV: 2}, 40000, nil, synth.Noise{Kind: "gaussian", Level: 0.05})
	res, err = Fit(context.Background(), noisy.X, noisy.Y, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Route != RouteNoisy || res.Certificate.Met || !strings.Contains(res.Reason, "no unit could be polished") {
		t.Errorf("noisy k = m: route %s, reason %q", res.Route, res.Reason)
	}
}

// A resampled start (fresh contractions, same moments) is again close to the
// truth, and the union of certified rows from several polishes counts each
// unit once.
func TestResampleAndMerge(t *testing.T) {
	in := newInstance(t, 91, synth.TwoLayerConfig{D: 12, K: 4, M: 6, CondV: 2}, 40000, nil, synth.Noise{})
	st, err := TensorStart(context.Background(), in.X, in.Y, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	V2, err := st.Resample(context.Background(), 2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if mat.Equal(V2, st.V) {
		t.Error("Resample with another seed returned the same rows")
	}
	found := &certifiedRows{}
	for _, start := range []*mat.Dense{st.V, V2} {
		V, reps, err := ExactPolish(context.Background(), in.X, st.Basis, start, PolishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found.add(V, reps)
	}
	if len(found.rows) != 4 {
		t.Fatalf("merged %d certified rows, want 4", len(found.rows))
	}
	V := mat.NewDense(4, 12, nil)
	for i, r := range found.rows {
		V.SetRow(i, r)
	}
	U, _, err := SolveU(in.X, in.Y, V, nn.ReLU)
	if err != nil {
		t.Fatal(err)
	}
	if e := compare(t, in.teacher, nn.NewTwoLayer(V, U)); e.MaxRelErr > 1e-9 {
		t.Errorf("merged rows: weight error %.1e", e.MaxRelErr)
	}
}

func TestSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	vals := make([]float64, 1000)
	for i := range vals {
		vals[i] = float64(rng.IntN(50)) // many ties
	}
	scratch := make([]int, len(vals))
	for _, sign := range []float64{1, -1} {
		for _, k := range []int{1, 7, 30, 500, 1000} {
			got := smallest(vals, sign, k, scratch)
			sorted := append([]float64(nil), vals...)
			for i := range sorted {
				sorted[i] *= sign
			}
			slices.Sort(sorted)
			for j, idx := range got {
				if sign*vals[idx] != sorted[j] {
					t.Fatalf("sign %v k=%d: position %d has %v, want %v", sign, k, j, sign*vals[idx], sorted[j])
				}
			}
		}
	}
}

// A float32 copy of exact data takes the route float64 data take: the rank
// test reads k from it (the rounding's singular values are not a sixth
// unit), the exact polish runs with tolerances grown to float32's roundoff
// (polishTolsFor), and the answer is certified at float32 precision. The
// 30-8-12 instance is one where float64 tolerances leave a unit
// uncertified (its activation's least-squares row misses by 16%).
func TestFloat32DataLearnedAtTheirPrecision(t *testing.T) {
	for _, c := range []struct{ d, k, m, n int }{{10, 3, 5, 20000}, {30, 8, 12, 50000}} {
		in, err := synth.DrawTwoLayerProblem(synth.TwoLayerProblemConfig{Teacher: synth.TwoLayerConfig{D: c.d, K: c.k, M: c.m}, N: c.n}, 4)
		if err != nil {
			t.Fatal(err)
		}
		float32Learned(t, in.X, in.Y, c.k)
	}
}

func float32Learned(t *testing.T, X, Y *mat.Dense, k int) {
	t.Helper()
	in := struct{ X, Y *mat.Dense }{mat.DenseCopyOf(X), mat.DenseCopyOf(Y)}
	for _, m := range [][]float64{in.X.RawMatrix().Data, in.Y.RawMatrix().Data} {
		for i, v := range m {
			m[i] = float64(float32(v))
		}
	}
	res, err := Fit(context.Background(), in.X, in.Y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Diagnostics.Precision != "float32" || res.Diagnostics.Hidden != k || res.Route != RouteExact || !res.Certificate.Met || res.Certificate.Tol > 1e-6 {
		t.Fatalf("precision %q, k %d, route %s, certificate %+v (%s)", res.Diagnostics.Precision, res.Diagnostics.Hidden, res.Route, res.Certificate, res.Reason)
	}
}
