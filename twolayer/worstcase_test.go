package twolayer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// wcInstance is a small teacher with arbitrary (caller-made) inputs.
type wcInstance struct {
	X, Y, V, U *mat.Dense
}

// randomTeacher draws V (k×d, unit rows) and U (m×k) Gaussian.
func randomTeacher(rng *rand.Rand, k, d, m int) (V, U *mat.Dense) {
	V = mat.NewDense(k, d, nil)
	for i := 0; i < k; i++ {
		row := V.RawRowView(i)
		for j := range row {
			row[j] = rng.NormFloat64()
		}
		s := math.Sqrt(dot(row, row))
		for j := range row {
			row[j] /= s
		}
	}
	U = mat.NewDense(m, k, nil)
	for i := range U.RawMatrix().Data {
		U.RawMatrix().Data[i] = rng.NormFloat64()
	}
	return V, U
}

func makeWC(X, V, U *mat.Dense) wcInstance {
	F := activations(X, V)
	var Y mat.Dense
	Y.Mul(F, U.T())
	return wcInstance{X: X, Y: &Y, V: V, U: U}
}

// cubeInstance: X uniform on [−1, 1]^d, a non-Gaussian input law.
func cubeInstance(seed uint64, n, d, k, m int) wcInstance {
	rng := synth.NewRand(seed)
	V, U := randomTeacher(rng, k, d, m)
	X := mat.NewDense(n, d, nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = 2*rng.Float64() - 1
	}
	return makeWC(X, V, U)
}

func rankOf(t testing.TB, A mat.Matrix) int {
	t.Helper()
	_, s, _, err := linalg.ThinSVD(A)
	if err != nil {
		t.Fatal(err)
	}
	return linalg.NumericalRank(s, 1e-10)
}

// checkExact runs WorstCase and checks the certificate and, independently,
// the residual of the returned model on the data.
func checkExact(t *testing.T, name string, in wcInstance, opt WorstCaseOptions) *WorstCaseReport {
	t.Helper()
	res, rep, err := WorstCaseWithReport(context.Background(), in.X, in.Y, opt)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.Route != RouteWorstCase || !res.Certificate.Met || res.Certificate.Residual > 1e-8 {
		t.Fatalf("%s: route %s, certificate %+v", name, res.Route, res.Certificate)
	}
	V, U := res.Model.Layers[0].Weight, res.Model.Layers[1].Weight
	if r := relResidual(in.X, in.Y, V, U); r > 1e-8 {
		t.Fatalf("%s: the returned model's residual is %.2e", name, r)
	}
	return rep
}

// [BJW19, Alg 2, Thm 1]: on arbitrary non-Gaussian X (uniform on a cube,
// k = 2, d = 4, n = 30), Alg 2 returns (U, V) with ‖Y − f(XVᵀ)Uᵀ‖_F ≤
// 1e-8‖Y‖_F whenever rank(Y) = k.
func TestWorstCaseCube(t *testing.T) {
	ran := 0
	for seed := uint64(1); seed <= 8; seed++ {
		in := cubeInstance(seed, 30, 4, 2, 2)
		if rankOf(t, in.Y) != 2 {
			continue // the claim only covers rank(Y) = k
		}
		ran++
		rep := checkExact(t, "cube", in, WorstCaseOptions{})
		if seed == 1 {
			t.Logf("seed 1: %+v", *rep)
		}
	}
	if ran < 6 {
		t.Fatalf("only %d of 8 seeds had rank(Y) = 2", ran)
	}
}

// Gaussian inputs, k = 3: the route does not care about the input law.
func TestWorstCaseGaussian(t *testing.T) {
	rng := synth.NewRand(11)
	V, U := randomTeacher(rng, 3, 5, 4)
	X, _ := synth.GaussianInputs(36, 5, nil, rng)
	checkExact(t, "gaussian k=3", makeWC(X, V, U), WorstCaseOptions{})
}

// Adversarial inputs: integer lattice points and integer weights (many exact
// zeros x·v = 0, repeated rows, singular k×k systems), a rank-deficient X,
// and samples whose scales span four orders of magnitude.
func TestWorstCaseAdversarial(t *testing.T) {
	rng := synth.NewRand(5)
	t.Run("lattice", func(t *testing.T) {
		n, d := 30, 4
		X := mat.NewDense(n, d, nil)
		for i := range X.RawMatrix().Data {
			X.RawMatrix().Data[i] = float64(rng.IntN(5) - 2)
		}
		V := mat.NewDense(2, d, []float64{1, -1, 0, 1, 0, 1, 1, -1})
		U := mat.NewDense(2, 2, []float64{1, 2, -1, 1})
		in := makeWC(X, V, U)
		zeros := 0
		var XV mat.Dense
		XV.Mul(X, V.T())
		for _, v := range XV.RawMatrix().Data {
			if v == 0 {
				zeros++
			}
		}
		if zeros < 5 || rankOf(t, in.Y) != 2 {
			t.Fatalf("instance not adversarial enough: %d exact zeros, rank %d", zeros, rankOf(t, in.Y))
		}
		checkExact(t, "lattice", in, WorstCaseOptions{})
	})
	t.Run("rank-deficient X", func(t *testing.T) {
		n, d := 30, 4
		Z := mat.NewDense(n, 3, nil)
		for i := range Z.RawMatrix().Data {
			Z.RawMatrix().Data[i] = rng.NormFloat64()
		}
		M := mat.NewDense(3, d, nil)
		for i := range M.RawMatrix().Data {
			M.RawMatrix().Data[i] = rng.NormFloat64()
		}
		var X mat.Dense
		X.Mul(Z, M)
		V, U := randomTeacher(rng, 2, d, 3)
		in := makeWC(&X, V, U)
		res, err := WorstCase(context.Background(), in.X, in.Y, WorstCaseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certificate.Met || len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0].String(), "rank 3") {
			t.Fatalf("certificate %+v, warnings %q", res.Certificate, res.Warnings)
		}
	})
	t.Run("scales", func(t *testing.T) {
		in := cubeInstance(3, 30, 4, 2, 2)
		for i := 0; i < 30; i++ {
			s := math.Pow(10, 4*rng.Float64()-2)
			row := in.X.RawRowView(i)
			for j := range row {
				row[j] *= s
			}
		}
		in = makeWC(in.X, in.V, in.U)
		checkExact(t, "scales", in, WorstCaseOptions{})
	})
}

// The sign-pattern count of [BJW19, Lemma 1]: for a generic Gaussian basis (n×k), the systems with
// a non-zero right-hand side give one pattern per region of the central
// arrangement {w : (Bw)_j = 0}, 2·Σ_{i<k} C(n−1,i) regions — except the
// all-negative region, whose polyhedron {Bw ≤ 0} only has the vertex w = 0
// (the spec's count silently assumes that region is empty, i.e. that the rows
// of B lie in no half-space). With ∅ from w = 0 the set has 2·Σ + 1 − h
// members, h = 1 when the rows lie in a half-space (checked by an LP here),
// and never more than C(2n,k) + 1.
func TestSignPatternCount(t *testing.T) {
	halfspaces := 0
	for _, c := range []struct{ k, n int }{{2, 7}, {3, 8}, {2, 12}, {3, 10}, {4, 9}, {3, 20}} {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := synth.NewRand(seed)
			B := mat.NewDense(c.n, c.k, nil)
			for i := range B.RawMatrix().Data {
				B.RawMatrix().Data[i] = rng.NormFloat64()
			}
			set, err := EnumerateSignPatterns(context.Background(), B, PatternOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// h: is {w : Bw ≤ −1} non-empty?
			G := make([][]float64, c.n)
			hs := make([]float64, c.n)
			for j := range G {
				G[j], hs[j] = append([]float64(nil), B.RawRowView(j)...), -1
			}
			_, inHalfspace, failed := solveFeasibility(G, hs, c.k, 1e-9)
			if failed {
				t.Fatal("half-space LP broke down")
			}
			h := 0
			if inHalfspace {
				h = 1
				halfspaces++
			}
			regions := int(GenericPatternCount(c.n, c.k)) - 1
			if set.FromNonzeroRHS != regions-h {
				t.Errorf("k=%d n=%d seed %d: %d patterns from non-zero right-hand sides, want 2·ΣC(n−1,i) − h = %d − %d", c.k, c.n, seed, set.FromNonzeroRHS, regions, h)
			}
			if set.Len() != regions+1-h || float64(set.Len()) > binom(2*c.n, c.k)+1 {
				t.Errorf("k=%d n=%d seed %d: |𝒮| = %d, want %d (bound %.0f)", c.k, c.n, seed, set.Len(), regions+1-h, binom(2*c.n, c.k)+1)
			}
			if set.Subsets != binomInt(c.n, c.k) || set.Systems != (set.Subsets-set.Singular)*((1<<c.k)-1) {
				t.Errorf("k=%d n=%d: %d subsets, %d singular, %d systems", c.k, c.n, set.Subsets, set.Singular, set.Systems)
			}
		}
	}
	if halfspaces == 0 {
		t.Error("no instance exercised the half-space case") // (3,8) has Wendel probability 29/128 per seed
	}
}

// Claim 8, second half: 𝒮 built from B = basis of col(Y) contains sign(X·v*_i)
// for every true unit, for cube and Gaussian inputs.
func TestSignPatternsContainTruth(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		in := cubeInstance(seed, 40, 5, 3, 3)
		if rankOf(t, in.Y) != 3 {
			continue
		}
		set, err := EnumerateSignPatterns(context.Background(), basis(t, in.Y, 3), PatternOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var XV mat.Dense
		XV.Mul(in.X, in.V.T())
		for i := 0; i < 3; i++ {
			S := PatternOf(mat.Col(nil, i, &XV), 0)
			if !set.Contains(S) {
				t.Errorf("seed %d: sign(X·v*_%d) = %v is missing from 𝒮 (%d patterns)", seed, i, S, set.Len())
			}
		}
		// A pattern that no vector of col(Y) realises is (generically) absent.
		if set.Contains(NewSignPattern(40, 0, 2, 4)) {
			t.Errorf("seed %d: an arbitrary 3-sample pattern is in 𝒮", seed)
		}
	}
}

// Alg 1: the true pattern is feasible and yields a multiple of the true row;
// once its z is among the previous ones it is infeasible; a pattern no
// activation realises is infeasible.
func TestIterativeLP(t *testing.T) {
	in := cubeInstance(2, 30, 4, 2, 2)
	B := basis(t, in.Y, 2)
	var XV mat.Dense
	XV.Mul(in.X, in.V.T())
	for i := 0; i < 2; i++ {
		S := PatternOf(mat.Col(nil, i, &XV), 0)
		w, z, ok, err := IterativeLP(in.X, B, S, nil, WorstCaseOptions{})
		if err != nil || !ok {
			t.Fatalf("unit %d: true pattern infeasible (err %v)", i, err)
		}
		// w is a positive multiple of v*_i (d = 4 ≤ |S|, generic X).
		c := dot(w, in.V.RawRowView(i)) / math.Sqrt(dot(w, w))
		if math.Abs(c-1) > 1e-9 {
			t.Errorf("unit %d: cos(w, v*) = %.12f, want 1", i, c)
		}
		if _, _, ok, _ := IterativeLP(in.X, B, S, [][]float64{z}, WorstCaseOptions{}); ok {
			t.Errorf("unit %d: pattern still feasible with its own z excluded", i)
		}
	}
	if _, _, ok, _ := IterativeLP(in.X, B, NewSignPattern(30, 1, 3, 5, 7, 11), nil, WorstCaseOptions{}); ok {
		t.Error("an arbitrary pattern is feasible")
	}
	if _, _, _, err := IterativeLP(in.X, B, NewSignPattern(29), nil, WorstCaseOptions{}); !errors.Is(err, ErrInput) {
		t.Errorf("pattern of the wrong length: err %v", err)
	}
}

// Guard rail: above MaxWork the route refuses with an error that says how
// long it would take and how to force it; Force runs it.
func TestWorstCaseGuardRail(t *testing.T) {
	in := cubeInstance(1, 200, 4, 3, 3)
	_, rep, err := WorstCaseWithReport(context.Background(), in.X, in.Y, WorstCaseOptions{})
	if !errors.Is(err, ErrWorkLimit) || !errors.Is(err, ErrInput) {
		t.Fatalf("n = 200, k = 3: err %v, want ErrWorkLimit", err)
	}
	msg := err.Error()
	for _, s := range []string{"WorstCaseOptions.Force", "estimated", "k ≤ 3"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q: %s", s, msg)
		}
	}
	if rep == nil || rep.EstimatedSeconds <= 0 || rep.Work != WorstCaseWork(200, 3) {
		t.Fatalf("report %+v", rep)
	}
	t.Logf("%v", err)

	small := cubeInstance(1, 30, 4, 2, 2)
	if _, err := WorstCase(context.Background(), small.X, small.Y, WorstCaseOptions{MaxWork: 100}); !errors.Is(err, ErrWorkLimit) {
		t.Fatalf("MaxWork 100: err %v", err)
	}
	checkExact(t, "forced", small, WorstCaseOptions{Options: Options{Force: true}, MaxWork: 100})
}

// Wrong k, noisy outputs and bad data give clear errors, not wrong answers.
func TestWorstCaseErrors(t *testing.T) {
	in := cubeInstance(1, 30, 4, 2, 3)
	ctx := context.Background()
	if _, err := WorstCase(ctx, in.X, in.Y, WorstCaseOptions{Options: Options{Hidden: 3}}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "NP-hard") {
		t.Errorf("k > rank: %v", err)
	}
	if _, err := WorstCase(ctx, in.X, in.Y, WorstCaseOptions{Options: Options{Hidden: 1}}); !errors.Is(err, ErrInput) {
		t.Errorf("k < rank: %v", err)
	}
	noisy := mat.DenseCopyOf(in.Y)
	rng := synth.NewRand(9)
	for i := range noisy.RawMatrix().Data {
		noisy.RawMatrix().Data[i] += 1e-3 * rng.NormFloat64()
	}
	// Rank 3 = m now; no exact 3-unit network explains noise.
	if _, err := WorstCase(ctx, in.X, noisy, WorstCaseOptions{}); !errors.Is(err, ErrNotExact) {
		t.Errorf("noisy Y: %v", err)
	}
	bad := mat.DenseCopyOf(in.X)
	bad.Set(0, 0, math.NaN())
	if _, err := WorstCase(ctx, bad, in.Y, WorstCaseOptions{}); !errors.Is(err, ErrInput) {
		t.Errorf("NaN X: %v", err)
	}
	if _, err := WorstCase(ctx, in.X, mat.NewDense(29, 3, nil), WorstCaseOptions{}); !errors.Is(err, ErrInput) {
		t.Errorf("row mismatch: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := WorstCase(cctx, in.X, in.Y, WorstCaseOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := EnumerateSignPatterns(ctx, mat.NewDense(2, 3, nil), PatternOptions{}); !errors.Is(err, ErrInput) {
		t.Errorf("wide basis: %v", err)
	}
}

func TestSignPatternBasics(t *testing.T) {
	p := PatternOf([]float64{1, -1, 0, 1e-20, 2}, 1e-9)
	if p.String() != "10001" || p.Count() != 2 || !p.Has(4) || p.Has(3) || p.Len() != 5 {
		t.Fatalf("pattern %v", p)
	}
	if !p.Equal(NewSignPattern(5, 0, 4)) || p.Equal(NewSignPattern(6, 0, 4)) {
		t.Fatal("Equal")
	}
	if got := NewSignPattern(130, 0, 64, 129).Indices(); len(got) != 3 || got[2] != 129 {
		t.Fatalf("indices %v", got)
	}
	if binom(60, 3) != 34220 || WorstCaseWork(30, 2) != binom(60, 2)*4 {
		t.Fatal("binom")
	}
}

// BenchmarkWorstCase is the claim-7 instance (k = 2, d = 4, n = 30, cube X):
// C(30,2) = 435 subsets × 3 systems, ~61 patterns, a few LPs.
func BenchmarkWorstCase(b *testing.B) {
	in := cubeInstance(1, 30, 4, 2, 2)
	for b.Loop() {
		if _, err := WorstCase(context.Background(), in.X, in.Y, WorstCaseOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignPatterns is P0 at the top of the supported range (k = 3,
// n = 60): C(60,3) = 34 220 subsets × 7 systems × n = 60 entries ≈ 1.4e7
// multiply-adds for the reads plus a 3×3 inverse and a 60×3×3 product per
// subset; 3 543 distinct patterns.
func BenchmarkSignPatterns(b *testing.B) {
	rng := synth.NewRand(1)
	B := mat.NewDense(60, 3, nil)
	for i := range B.RawMatrix().Data {
		B.RawMatrix().Data[i] = rng.NormFloat64()
	}
	for b.Loop() {
		if _, err := EnumerateSignPatterns(context.Background(), B, PatternOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// Thm 1 promises some exact factorisation, not the teacher: with n = 6
// samples in d = 4 dimensions many networks reproduce Y, and the route
// returns one that differs from (U*, V*) yet fits exactly.
func TestWorstCaseNotIdentifiable(t *testing.T) {
	in := cubeInstance(1, 6, 4, 2, 2)
	res, err := WorstCase(context.Background(), in.X, in.Y, WorstCaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := compare(t, nn.NewTwoLayer(in.V, in.U), res.Model)
	if !res.Certificate.Met || e.MaxRelErr < 0.1 {
		t.Fatalf("certificate %+v, weight error %.2e: expected an exact fit by a different network", res.Certificate, e.MaxRelErr)
	}
}

// The NP-hardness instances of Thm 2 have rank(Y) = 1 < k = 2, exactly the
// case Alg 2 excludes: the route refuses k = 2 with an error that says why,
// although the planted witness fits exactly.
func TestWorstCaseRefusesHardnessInstance(t *testing.T) {
	f, plant, err := synth.PlantedReversible6SAT(8, 4, synth.NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	h, err := synth.SATReduction(f, false)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := h.Witness(plant)
	if r := relResidual(h.X, h.Y, w.Layers[0].Weight, w.Layers[1].Weight); r != 0 {
		t.Fatalf("witness residual %v", r)
	}
	_, err = WorstCase(context.Background(), h.X, h.Y, WorstCaseOptions{Options: Options{Hidden: 2}})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "NP-hard") {
		t.Fatalf("err %v", err)
	}
}

// Fit's worst-case route certifies against Fit's CertTol: a caller's loose
// 1e-3 is the tolerance reported and met, not the route's own 1e-8, and a
// strict 1e-30 fails with ErrNotExact. Without a CertTol, float32 data get
// the float32 certificate tolerance (WorstCaseWithReport, 16·u).
func TestWorstCaseHonoursCertTol(t *testing.T) {
	in := cubeInstance(1, 30, 4, 2, 2)
	res, err := Fit(context.Background(), in.X, in.Y, Options{Route: UseWorstCase, CertTol: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Certificate.Tol != 1e-3 || !res.Certificate.Met {
		t.Fatalf("certificate %+v, want tolerance 1e-3", res.Certificate)
	}
	if _, err := Fit(context.Background(), in.X, in.Y, Options{Route: UseWorstCase, CertTol: 1e-30}); !errors.Is(err, ErrNotExact) {
		t.Fatalf("CertTol 1e-30: err %v, want ErrNotExact", err)
	}
	p, err := newProblem(in.X, in.Y)
	if err != nil {
		t.Fatal(err)
	}
	p.roundoff = certify.Float32Roundoff // as if read from float32 files
	res, _, err = worstCase(context.Background(), p, WorstCaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := certify.DefaultTol(certify.Float32Roundoff); res.Certificate.Tol != want {
		t.Fatalf("float32 data: certificate tolerance %.1e, want %.1e", res.Certificate.Tol, want)
	}
}
