package depth2

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/tensor"
)

// [ATV21, Lemma 3.5] (multivariate): the empirical Hermite moments of a
// network match the lemma's coefficients within 4 split-half noise levels.
func TestCoefficientsMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 1))
	net := randomNet(3, 2, []float64{-0.6, 1.1}, rng)
	X := testutil.RandDense(rng, 400000, 3)
	Y := net.Forward(X)
	mo, err := EstimateMoments(context.Background(), X, Y, MomentOptions{MaxOrder: 4})
	if err != nil {
		t.Fatal(err)
	}
	pop, _ := PopulationMoments(net, 4)
	for r := 0; r <= 4; r++ {
		diff := mo.T[0][r].Clone()
		diff.AddScaled(-1, pop.T[0][r])
		e := diff.Norm()
		if e > 4*mo.Noise[r]+1e-12 {
			t.Errorf("order %d: ‖T̂ − f‖ = %.3g, split-half noise %.3g", r, e, mo.Noise[r])
		}
		if pop.T[0][r].Norm() < 5*mo.Noise[r] {
			t.Errorf("order %d: the signal %.3g is not above the noise %.3g, the test cannot fail", r, pop.T[0][r].Norm(), mo.Noise[r])
		}
	}
}

// The directional identity for population moments:
// f_k(u, …, u) = Σ a_i c_k(b_i)(w_i·u)^k, which equals E[y·He_k(u·x)]
// since ⟨He_k(x), u^{⊗k}⟩ = He_k(u·x) for a unit u (checked for samples in
// package tensor).
func TestDirectional(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 1))
	net := randomNet(4, 3, []float64{0.2, -0.7, 1.3}, rng)
	pop, _ := PopulationMoments(net, 6)
	u := []float64{0.5, -0.5, 0.5, 0.5}
	for k := 0; k <= 6; k++ {
		want := 0.0
		for i := 0; i < 3; i++ {
			want += net.A.At(0, i) * hermite.ReLUBias(k, net.B[i]) * math.Pow(vec.Dot(net.W.RawRowView(i), u), float64(k))
		}
		if got := pop.T[0][k].Apply(u); math.Abs(got-want) > 1e-14 {
			t.Errorf("k=%d: f_k(u,…,u) = %v, want %v", k, got, want)
		}
	}
}

// [ATV21, Claim 4.7]: flipping (b_i, w_i) → (−b_i, −w_i) leaves f_k unchanged
// for k ≥ 2; f_0 shifts by −Σ a_i b_i and f_1 by −Σ a_i w_i over the flipped
// units.
func TestSignInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 1))
	net := randomNet(4, 5, []float64{0.3, -1.2, 0.8, 0, -0.4}, rng)
	flipped := net.Clone()
	shift0 := 0.0
	shift1 := make([]float64, 4)
	for _, i := range []int{1, 3} {
		w := flipped.W.RawRowView(i)
		a := net.A.At(0, i)
		shift0 -= a * net.B[i]
		for j := range w {
			shift1[j] -= a * w[j]
			w[j] = -w[j]
		}
		flipped.B[i] = -flipped.B[i]
	}
	f, _ := PopulationMoments(net, 6)
	g, _ := PopulationMoments(flipped, 6)
	for k := 2; k <= 6; k++ {
		diff := g.T[0][k].Clone()
		diff.AddScaled(-1, f.T[0][k])
		if e := diff.Norm(); e > 1e-15 {
			t.Errorf("order %d changed by %.2e", k, e)
		}
	}
	if e := g.T[0][0].Data[0] - f.T[0][0].Data[0] - shift0; math.Abs(e) > 1e-15 {
		t.Errorf("f_0 shift off by %v", e)
	}
	for j := range shift1 {
		if e := g.T[0][1].Data[j] - f.T[0][1].Data[j] - shift1[j]; math.Abs(e) > 1e-15 {
			t.Errorf("f_1[%d] shift off by %v", j, e)
		}
	}
}

// Parity and rank ([ATV21, Lemma 3.5] with He's zeros): with b = 0 the odd
// tensors of order ≥ 3 vanish; a unit at a root of He_{2ℓ−1} (He_{2ℓ}) is
// absent from f_{2ℓ+1} (f_{2ℓ+2}), and the flattening ranks count the units
// present.
func TestParityAndRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 1))
	zero := randomNet(4, 3, []float64{0, 0, 0}, rng)
	f, _ := PopulationMoments(zero, 6)
	for _, k := range []int{3, 5} {
		if e := f.T[0][k].Norm(); e > 1e-16 {
			t.Errorf("b = 0: ‖f_%d‖ = %v", k, e)
		}
	}
	rank := func(T *tensor.Symmetric, ell int) int {
		_, s, _, _ := linalg.ThinSVD(T.Matricize(ell))
		return linalg.NumericalRank(s, 1e-10)
	}
	// ℓ = 1: b = 0 hides a unit from f_3, b = ±1 (roots of He_2) from f_4.
	net := randomNet(5, 4, []float64{0, 1, -0.5, 0.7}, rng)
	g, _ := PopulationMoments(net, 4)
	if r3, r4 := rank(g.T[0][3], 1), rank(g.T[0][4], 1); r3 != 3 || r4 != 3 {
		t.Errorf("ℓ=1 ranks (%d, %d), want (3, 3)", r3, r4)
	}
	// ℓ = 2, d = 4, m = 7: one b at √3 (root of He_3), one at a root of He_4.
	over := randomNet(4, 7, []float64{math.Sqrt(3), math.Sqrt(3 + math.Sqrt(6)), 0.1, -0.3, 0.6, -0.9, 1.2}, rng)
	h, _ := PopulationMoments(over, 6)
	if r5, r6 := rank(h.T[0][5], 2), rank(h.T[0][6], 2); r5 != 6 || r6 != 6 {
		t.Errorf("ℓ=2 ranks (%d, %d), want (6, 6)", r5, r6)
	}
}

// FixSigns (the sign step in the proof of [ATV21, Theorem 3.1]): in the
// full-rank case its least-squares solution is z_i = ξ_i·Φ(b_i) exactly
// (SignMargin 1), and it restores every sign.
func TestFixSigns(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 1))
	net := randomNet(6, 4, []float64{0.4, -1.5, 0.9, -0.2}, rng)
	mo, _ := PopulationMoments(net, 4)
	var units []Unit
	for i := 0; i < 4; i++ {
		xi := 1.0
		if i%2 == 1 {
			xi = -1
		}
		w := mat.Row(nil, i, net.W)
		for j := range w {
			w[j] *= xi
		}
		units = append(units, Unit{W: w, B: xi * net.B[i], A: []float64{net.A.At(0, i)}})
	}
	if err := FixSigns(units, mo); err != nil {
		t.Fatal(err)
	}
	for i, u := range units {
		if math.Abs(u.B-net.B[i]) > 1e-13 || math.Abs(u.SignMargin-1) > 1e-12 || vec.Dot(u.W, net.W.RawRowView(i)) < 1-1e-12 {
			t.Errorf("unit %d: b %v (want %v), margin %v", i, u.B, net.B[i], u.SignMargin)
		}
	}
}

// [ATV21, Claim 4.8]: with linearly dependent w_i (Σ β_i w_i = 0), b = 0 and
// a = β, flipping every unit with β_i ≠ 0 gives the same function.
func TestNonIdentifiable(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	d, m := 3, 5
	W := mat.NewDense(m, d, nil)
	for i := range W.RawMatrix().Data {
		W.RawMatrix().Data[i] = rng.NormFloat64()
	}
	ns, err := linalg.NullSpace(W.T(), 0)
	if err != nil || ns == nil {
		t.Fatal("no null vector")
	}
	beta := mat.Col(nil, 0, ns)
	A := mat.NewDense(1, m, beta)
	f := &nn.Depth2{W: W, B: make([]float64, m), A: A}
	g := f.Clone()
	for i := 0; i < m; i++ {
		if beta[i] != 0 {
			row := g.W.RawRowView(i)
			for j := range row {
				row[j] = -row[j]
			}
		}
	}
	X := testutil.RandDense(rng, 1000, d)
	F, G := f.Forward(X), g.Forward(X)
	for q := 0; q < 1000; q++ {
		if math.Abs(F.At(q, 0)-G.At(q, 0)) > 1e-14 {
			t.Fatalf("sample %d: f = %v, g = %v", q, F.At(q, 0), G.At(q, 0))
		}
	}
	// ResolveSigns sees the ambiguity: two patterns remove the affine term.
	fl := f.FlipUnit(0)
	_, _, rest, ties := ResolveSigns(fl)
	if rest > 1e-12 || ties < 2 {
		t.Errorf("ResolveSigns: rest %v, ties %d; want 0 and ≥ 2", rest, ties)
	}
}

// [ATV21, Claim D.14]: the merged (m′+2)-unit network equals the
// 2m′-unit + affine network pointwise.
func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	d, m := 4, 3
	g := &Improper{W: mat.NewDense(m, d, nil), B: make([]float64, m), Alpha: make([]float64, m), AlphaPrime: make([]float64, m), V: make([]float64, d), C: rng.NormFloat64()}
	for i := range g.W.RawMatrix().Data {
		g.W.RawMatrix().Data[i] = rng.NormFloat64()
	}
	for i := 0; i < m; i++ {
		g.B[i], g.Alpha[i], g.AlphaPrime[i] = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
	}
	for j := range g.V {
		g.V[j] = rng.NormFloat64()
	}
	merged := g.Merge()
	if merged.Hidden() != m+2 || merged.L != nil || merged.C[0] != 0 {
		t.Fatalf("merged network has %d units, L %v, C %v", merged.Hidden(), merged.L, merged.C)
	}
	X := testutil.RandDense(rng, 2000, d)
	want := g.Eval(X)
	got := merged.Forward(X)
	for q, w := range want {
		if math.Abs(got.At(q, 0)-w) > 1e-12*math.Max(1, math.Abs(w)) {
			t.Fatalf("sample %d: merged %v, improper %v", q, got.At(q, 0), w)
		}
	}
	// The affine term of an nn.Depth2 is saved as unit pairs, exactly.
	net := randomNet(d, m, []float64{0.1, -0.2, 0.3}, rng)
	net.L = mat.NewDense(1, d, []float64{0.5, -1, 0.25, 2})
	net.C = []float64{0.7}
	mlp := net.MLP()
	if mlp.Layers[0].Out() != m+2 {
		t.Fatalf("MLP has %d units, want %d", mlp.Layers[0].Out(), m+2)
	}
	F, M := net.Forward(X), mlp.Forward(X)
	for q := 0; q < 2000; q++ {
		if math.Abs(F.At(q, 0)-M.At(q, 0)) > 1e-12 {
			t.Fatalf("MLP export differs at %d: %v vs %v", q, F.At(q, 0), M.At(q, 0))
		}
	}
}

// Parseval ([ATV21, Proposition B.1]): the partial sums
// Σ_{k≤K} ‖f_k − g_k‖²/k! increase towards the closed-form E[(f − g)²] and
// come within 1e-3 of it by K = 60, slowly (the series converges only
// polynomially).
func TestParseval(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	f := randomNet(3, 2, []float64{0.3, -0.8}, rng)
	g := randomNet(3, 3, []float64{-0.1, 0.6, 1.4}, rng)
	exact, err := metrics.L2Depth2(f.MLP(), g.MLP())
	if err != nil {
		t.Fatal(err)
	}
	// Units of f − g (unit rows), tensor-free: ‖Σ α_i c_k(b_i) u_i^{⊗k}‖² =
	// Σ_ij α_i α_j c_k(b_i) c_k(b_j) (u_i·u_j)^k.
	type unit struct {
		u    []float64
		b, a float64
	}
	var us []unit
	for _, x := range []struct {
		n *nn.Depth2
		s float64
	}{{f, 1}, {g, -1}} {
		for i := 0; i < x.n.Hidden(); i++ {
			us = append(us, unit{x.n.W.RawRowView(i), x.n.B[i], x.s * x.n.A.At(0, i)})
		}
	}
	// c_k(b)/√k! in normalised form: φ(b)·h_{k−2}(b)/√(k(k−1)) for k ≥ 2.
	coef := func(k int, b float64) float64 {
		switch k {
		case 0:
			return hermite.ReLUMean(b)
		case 1:
			return hermite.NormCDF(b)
		}
		s := hermite.NormPDF(b) * hermite.HeNormalized(k-2, b) / math.Sqrt(float64(k*(k-1)))
		if k%2 == 1 {
			s = -s
		}
		return s
	}
	sum, prev := 0.0, -1.0
	var at10 float64
	for k := 0; k <= 60; k++ {
		term := 0.0
		for _, x := range us {
			for _, y := range us {
				term += x.a * y.a * coef(k, x.b) * coef(k, y.b) * math.Pow(vec.Dot(x.u, y.u), float64(k))
			}
		}
		sum += term
		if sum < prev-1e-15 {
			t.Fatalf("partial sums decrease at k=%d", k)
		}
		prev = sum
		if k == 10 {
			at10 = sum
		}
	}
	gap := (exact - sum) / exact
	if gap < 0 || gap > 1e-3 {
		t.Errorf("after 60 terms the relative gap is %.2e, want in [0, 1e-3]", gap)
	}
	if (exact-at10)/exact < gap {
		t.Errorf("the gap did not shrink from k=10 to k=60")
	}
	t.Logf("E[(f−g)²] = %.6g; relative gap after 10 terms %.1e, after 60 %.1e", exact, (exact-at10)/exact, gap)
}

// [ATV21, Lemma 4.5]: the scalar formulas recover ξz and a from exact γ's to
// 1e-12, for ℓ = 1 and ℓ = 2, including z at roots of He_{ℓ−1}, He_ℓ.
func TestScalarInversion(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	zs := []float64{0, 1, -1, math.Sqrt(3), 2.7, -3.1}
	for trial := 0; trial < 200; trial++ {
		z := 4 * (2*rng.Float64() - 1)
		if trial < len(zs) {
			z = zs[trial]
		}
		a := []float64{(0.5 + 1.5*rng.Float64()) * float64(1-2*rng.IntN(2)), rng.NormFloat64()}
		beta := []float64{a[0] * hermite.NormPDF(z), a[1] * hermite.NormPDF(z)}
		for ell := 1; ell <= 2; ell++ {
			gamma := func(h int) []float64 {
				s := hermite.He(h, z)
				if h%2 == 1 {
					s = -s
				}
				return []float64{s * beta[0], s * beta[1]}
			}
			gz, ga := invertScalars(ell, gamma)
			if math.Abs(gz-z) > 1e-12*math.Max(1, math.Abs(z)) || math.Abs(ga[0]-a[0]) > 1e-11*math.Abs(a[0]) || math.Abs(ga[1]-a[1]) > 1e-11*math.Max(1, math.Abs(a[1])) {
				t.Errorf("ℓ=%d z=%v a=%v: got z=%v a=%v", ell, z, a, gz, ga)
			}
		}
	}
}

// The residualisation of the outputs (not in [ATV21]; its mean part): the
// expectation of T̂_k, k ≥ 3, is unchanged (difference within noise) and the
// error is lower.
func TestResidualization(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 1))
	net := randomNet(3, 2, []float64{0.5, -0.3}, rng)
	pop, _ := PopulationMoments(net, 4)
	var with, without [5]float64
	for rep := 0; rep < 3; rep++ {
		X := testutil.RandDense(rng, 200000, 3)
		Y := net.Forward(X)
		a, _ := EstimateMoments(context.Background(), X, Y, MomentOptions{MaxOrder: 4})
		b, _ := EstimateMoments(context.Background(), X, Y, MomentOptions{MaxOrder: 4, NoResidualize: true})
		for k := 2; k <= 4; k++ {
			da := a.T[0][k].Clone()
			da.AddScaled(-1, pop.T[0][k])
			db := b.T[0][k].Clone()
			db.AddScaled(-1, pop.T[0][k])
			with[k] += da.Norm()
			without[k] += db.Norm()
		}
	}
	for k := 2; k <= 4; k++ {
		if with[k] > 0.8*without[k] {
			t.Errorf("order %d: residualised error %.3g vs plain %.3g, want ≥ 20%% lower", k, with[k]/3, without[k]/3)
		}
		t.Logf("order %d: mean error residualised %.3g, plain %.3g (ratio %.2f)", k, with[k]/3, without[k]/3, without[k]/with[k])
	}
}

// The estimator's sample rate: ‖T̂_k − f_k‖_F falls like N^{−1/2} (log-log
// slope in [−0.65, −0.35] over a 16× range, mean of 3 seeds).
func TestSampleRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	net := randomNet(3, 2, []float64{0.5, -0.3}, rng)
	pop, _ := PopulationMoments(net, 4)
	ns := []int{25000, 100000, 400000}
	var logE [3][5]float64
	for i, n := range ns {
		for rep := 0; rep < 3; rep++ {
			X := testutil.RandDense(rng, n, 3)
			mo, _ := EstimateMoments(context.Background(), X, net.Forward(X), MomentOptions{MaxOrder: 4})
			for k := 3; k <= 4; k++ {
				d := mo.T[0][k].Clone()
				d.AddScaled(-1, pop.T[0][k])
				logE[i][k] += math.Log(d.Norm()) / 3
			}
		}
	}
	for k := 3; k <= 4; k++ {
		slope := (logE[2][k] - logE[0][k]) / (math.Log(float64(ns[2])) - math.Log(float64(ns[0])))
		if slope < -0.65 || slope > -0.35 {
			t.Errorf("order %d: log-log slope %.2f, want ≈ −0.5", k, slope)
		}
	}
}

// Fit on small noiseless data returns an exact, certified network, the
// same at any seed-fixed rerun, and the moment estimate on the side.
func TestFitNoiselessSmall(t *testing.T) {
	rng := synth.NewRand(7)
	teacher, err := synth.Depth2Teacher(synth.Depth2Config{D: 6, M: 3}, rng)
	if err != nil {
		t.Fatal(err)
	}
	X, _ := synth.GaussianInputs(150000, 6, nil, rng)
	Y, _, _ := synth.Depth2Data(teacher, X, synth.Noise{}, rng)
	res, err := Fit(context.Background(), X, Y, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certificate.Met || res.Route != RouteRefined {
		t.Fatalf("route %s, certificate %+v, reason %s, warnings %v", res.Route, res.Certificate, res.Reason, res.Warnings)
	}
	if !res.Diagnostics.HiddenInferred || res.Diagnostics.Hidden != 3 {
		t.Errorf("inferred width %d", res.Diagnostics.Hidden)
	}
	e, err := metrics.CompareDepth2(teacher, res.Model.MLP(), false)
	if err != nil {
		t.Fatal(err)
	}
	if e.MaxErr > 1e-9 {
		t.Errorf("max parameter error %.2e", e.MaxErr)
	}
	em, _ := metrics.CompareDepth2(teacher, res.Moment.MLP(), false)
	if em.MaxErr < 1e-6 || em.MaxErr > 0.5 {
		t.Errorf("moment-only error %.2e: expected rough but sane", em.MaxErr)
	}
	t.Logf("moment-only error %.2e, refined %.2e, certificate %.1e", em.MaxErr, e.MaxErr, res.Certificate.Residual)
}
