package ica

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

// mixture returns X = S·Aᵀ for n samples of the given sources (each a
// sampler) and a seeded Gaussian mixing A (p×c), plus A and the sources'
// population standard deviations.
func mixture(n int, sources []func(*rand.Rand) float64, seed uint64) (X, A, S *mat.Dense) {
	rng := rand.New(rand.NewPCG(seed, 77))
	c := len(sources)
	A = mat.NewDense(c, c, nil)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	S = mat.NewDense(n, c, nil)
	for i := 0; i < n; i++ {
		for j, f := range sources {
			S.Set(i, j, f(rng))
		}
	}
	X = mat.NewDense(n, c, nil)
	X.Mul(S, A.T())
	return X, A, S
}

var (
	relu    = func(r *rand.Rand) float64 { return math.Max(r.NormFloat64(), 0) }
	expo    = func(r *rand.Rand) float64 { return r.ExpFloat64() }
	uniform = func(r *rand.Rand) float64 { return r.Float64() }
	laplace = func(r *rand.Rand) float64 {
		if r.IntN(2) == 0 {
			return -r.ExpFloat64()
		}
		return r.ExpFloat64()
	}
)

// mixingError matches each true column (scaled by its source's sample
// standard deviation) with the estimated column of largest |cosine| and
// returns ‖Â·Π − A·D‖_F/‖A·D‖_F with D the sources' standard deviations,
// the smallest signed cosine of the matches (positive when the signs are
// right) and whether the matching is a permutation.
func mixingError(t *testing.T, est, A, S *mat.Dense, allowSign bool) (rel, minCos float64) {
	t.Helper()
	p, c := A.Dims()
	n, _ := S.Dims()
	used := make([]bool, c)
	var num, den float64
	minCos = 1
	for j := 0; j < c; j++ {
		col := mat.Col(nil, j, S)
		var m, v float64
		for _, x := range col {
			m += x
		}
		m /= float64(n)
		for _, x := range col {
			v += (x - m) * (x - m)
		}
		sd := math.Sqrt(v / float64(n))
		a := mat.Col(nil, j, A)
		for i := range a {
			a[i] *= sd
		}
		best, bestCos := -1, 0.0
		for l := 0; l < c; l++ {
			e := mat.Col(nil, l, est)
			cs := cosine(a, e)
			if best < 0 || math.Abs(cs) > math.Abs(bestCos) {
				best, bestCos = l, cs
			}
		}
		if used[best] {
			t.Fatalf("estimated column %d matched twice", best)
		}
		used[best] = true
		sgn := 1.0
		if allowSign && bestCos < 0 {
			sgn = -1
		}
		minCos = math.Min(minCos, sgn*bestCos)
		for i := 0; i < p; i++ {
			d := sgn*est.At(i, best) - a[i]
			num += d * d
			den += a[i] * a[i]
		}
	}
	return math.Sqrt(num / den), minCos
}

func cosine(a, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += a[i] * b[i]
		aa += a[i] * a[i]
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

// FastICA recovers the mixing matrix to O(n^{-1/2}) with every contrast on
// sources it can see: all four kinds for kurtosis and log cosh, the skewed
// ones for the skewness contrast. With skewed sources the skewness sign rule
// gives the true signs.
func TestSeparatesMixtures(t *testing.T) {
	const n = 50000
	cases := []struct {
		g       Nonlinearity
		sources []func(*rand.Rand) float64
		signs   bool // all sources positively skewed: signs are identifiable
	}{
		{Kurtosis, []func(*rand.Rand) float64{relu, uniform, laplace, expo}, false},
		{LogCosh, []func(*rand.Rand) float64{relu, uniform, laplace, expo}, false},
		{Kurtosis, []func(*rand.Rand) float64{relu, relu, relu, expo}, true},
		{Skewness, []func(*rand.Rand) float64{relu, relu, relu, expo}, true},
	}
	for _, tc := range cases {
		X, A, S := mixture(n, tc.sources, 3)
		res, err := FastICA(context.Background(), X, Options{Nonlinearity: tc.g, Seed: 5})
		if err != nil {
			t.Fatalf("%v: %v", tc.g, err)
		}
		if !res.Converged || res.Change > 1e-10 || res.Iterations >= 1000 {
			t.Errorf("%v: converged %v after %d iterations, change %.1e", tc.g, res.Converged, res.Iterations, res.Change)
		}
		rel, minCos := mixingError(t, res.Mixing, A, S, !tc.signs)
		t.Logf("%v: iters %d change %.1e rel %.4f mincos %.5f skew %.3f", tc.g, res.Iterations, res.Change, rel, minCos, res.Skewness)
		if rel > 0.05 {
			t.Errorf("%v: relative mixing error %.3f, want O(n^-1/2) ≤ 0.05", tc.g, rel)
		}
		if minCos < 0.99 {
			t.Errorf("%v: a matched column has cosine %.3f (signs identifiable: %v)", tc.g, minCos, tc.signs)
		}
		for j, sk := range res.Skewness {
			if sk < 0 {
				t.Errorf("%v: source %d has skewness %.3f < 0 after the sign rule", tc.g, j, sk)
			}
		}
		// Mixing and Unmixing are inverse on the data span.
		var P mat.Dense
		P.Mul(res.Unmixing, res.Mixing)
		if d := testutil.DiffNormInf(&P, eye(4)); d > 1e-10 {
			t.Errorf("%v: Unmixing·Mixing differs from I by %.1e", tc.g, d)
		}
	}
}

// The assumption the ICA route ([BJW19, Alg 3]) rests on: the hidden
// activations of a ReLU layer with orthonormal weights and Gaussian inputs
// are independent rectified Gaussians, with skewness 1.6406 and excess
// kurtosis +2.4076 (larger than a Gaussian's; [BJW19, Def 6 and Thm 3] say
// smaller, an erratum), mean 0.398942 and variance 0.340845, so
// mean/std = 0.68333. FastICA on their mixture must return sources with these
// statistics.
func TestRectifiedGaussianSources(t *testing.T) {
	const n = 400000
	X, _, _ := mixture(n, []func(*rand.Rand) float64{relu, relu, relu}, 8)
	res, err := FastICA(context.Background(), X, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The unmixed, uncentred mean is (Unmixing·Mean)_j = μ/σ.
	var m mat.VecDense
	m.MulVec(res.Unmixing, mat.NewVecDense(3, res.Mean))
	want := 0.398942 / math.Sqrt(0.340845)
	for j := 0; j < 3; j++ {
		// Standard errors at n = 4e5: skewness ~√(var/n) ≈ 0.01, kurtosis
		// ≈ 0.04 (heavy tail), mean/std ≈ 0.002; the tolerances are ~4 SE.
		if d := res.Skewness[j] - 1.6406; math.Abs(d) > 0.04 {
			t.Errorf("source %d: skewness %.4f, want 1.6406", j, res.Skewness[j])
		}
		if d := res.ExcessKurtosis[j] - 2.4076; math.Abs(d) > 0.2 {
			t.Errorf("source %d: excess kurtosis %.4f, want 2.4076", j, res.ExcessKurtosis[j])
		}
		if d := m.AtVec(j) - want; math.Abs(d) > 0.01 {
			t.Errorf("source %d: mean/std %.4f, want %.4f", j, m.AtVec(j), want)
		}
	}
}

// A run stopped before Tol is met is reported, never passed off as converged.
func TestNotConvergedIsReported(t *testing.T) {
	X, _, _ := mixture(5000, []func(*rand.Rand) float64{relu, uniform, laplace}, 4)
	res, err := FastICA(context.Background(), X, Options{MaxIter: 1, Seed: 2})
	if !errors.Is(err, ErrNotConverged) {
		t.Fatalf("err = %v, want ErrNotConverged", err)
	}
	if res == nil || res.Converged || res.Iterations != 1 || res.Change <= 1e-10 {
		t.Fatalf("result %+v: want the last iterate with Converged false", res)
	}
}

// Fewer components than columns: the data are reduced to their principal
// components first, and the extracted sources are still independent ones.
func TestFewerComponents(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 30000
	// Two skewed sources spread over 5 columns (rank 2).
	A := mat.NewDense(5, 2, nil)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	S := mat.NewDense(n, 2, nil)
	for i := 0; i < n; i++ {
		S.Set(i, 0, relu(rng))
		S.Set(i, 1, expo(rng))
	}
	X := mat.NewDense(n, 5, nil)
	X.Mul(S, A.T())
	if _, err := FastICA(context.Background(), X, Options{}); !errors.Is(err, ErrRankDeficient) {
		t.Errorf("5 components from rank-2 data: err = %v, want ErrRankDeficient", err)
	}
	res, err := FastICA(context.Background(), X, Options{Components: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	rel, minCos := mixingError(t, res.Mixing, A, S, false)
	if rel > 0.05 || minCos < 0.99 {
		t.Errorf("relative mixing error %.3f, min cosine %.3f", rel, minCos)
	}
}

func TestDeterministicAcrossProcs(t *testing.T) {
	X, _, _ := mixture(3*chunkRows+17, []func(*rand.Rand) float64{relu, expo, laplace}, 6)
	run := func(procs int) *Result {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		res, err := FastICA(context.Background(), X, Options{Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(1), run(4)
	if !mat.Equal(a.Mixing, b.Mixing) || a.Iterations != b.Iterations {
		t.Errorf("GOMAXPROCS 1 and 4 differ (iterations %d vs %d)", a.Iterations, b.Iterations)
	}
	c := run(2)
	if !mat.Equal(a.Sources, c.Sources) {
		t.Error("sources differ between GOMAXPROCS 1 and 2")
	}
}

func TestBadInput(t *testing.T) {
	good, _, _ := mixture(100, []func(*rand.Rand) float64{relu, expo}, 1)
	nan := mat.DenseCopyOf(good)
	nan.Set(3, 1, math.NaN())
	cases := []struct {
		name string
		X    mat.Matrix
		opt  Options
		want error
	}{
		{"nil", nil, Options{}, ErrShape},
		{"NaN", nan, Options{}, ErrNotFinite},
		{"too many components", good, Options{Components: 3}, ErrShape},
		{"negative components", good, Options{Components: -1}, ErrShape},
		{"too few samples", mat.NewDense(4, 2, []float64{1, 2, 3, 4, 5, 6, 7, 9}), Options{}, ErrShape},
		{"constant", mat.NewDense(10, 2, nil), Options{}, ErrRankDeficient},
		{"nonlinearity", good, Options{Nonlinearity: 7}, ErrShape},
	}
	for _, tc := range cases {
		if _, err := FastICA(context.Background(), tc.X, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCancel(t *testing.T) {
	X, _, _ := mixture(1000, []func(*rand.Rand) float64{relu, expo}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := FastICA(ctx, X, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestParseNonlinearity(t *testing.T) {
	for s, want := range map[string]Nonlinearity{"": Kurtosis, "cube": Kurtosis, "Skewness": Skewness, "tanh": LogCosh, "logcosh": LogCosh} {
		if g, err := ParseNonlinearity(s); err != nil || g != want {
			t.Errorf("%q: %v %v, want %v", s, g, err, want)
		}
		if g, _ := ParseNonlinearity(want.String()); g != want {
			t.Errorf("%v does not round-trip through String", want)
		}
	}
	if _, err := ParseNonlinearity("relu"); !errors.Is(err, ErrShape) {
		t.Errorf("unknown name: err = %v", err)
	}
}

// BenchmarkFastICA: 6 mixed rectified Gaussians, n = 1e5 (the ICA route's
// size). Floor: the whitening SVD ~4·n·c² = 1.4e7 flops and 4·n·c² = 1.4e7
// flops per iteration, ~20 iterations: ~3e8 flops ≈ 30 ms at ~10 GFLOP/s.
func BenchmarkFastICA(b *testing.B) {
	X, _, _ := mixture(100000, []func(*rand.Rand) float64{relu, relu, relu, relu, relu, relu}, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := FastICA(context.Background(), X, Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Iterations), "iters")
	}
}

func eye(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		m.Set(i, i, 1)
	}
	return m
}
