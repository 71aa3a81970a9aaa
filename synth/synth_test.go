package synth

import (
	"errors"
	"math"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

func TestNewRandDeterministic(t *testing.T) {
	a, b, c := NewRand(7), NewRand(7), NewRand(8)
	same, diff := true, false
	for i := 0; i < 100; i++ {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		same = same && x == y
		diff = diff || x != z
	}
	if !same || !diff {
		t.Errorf("same seed equal: %v, different seeds differ: %v", same, diff)
	}
}

func TestTwoLayerTeacherDeterministic(t *testing.T) {
	cfg := TwoLayerConfig{D: 12, K: 5, M: 7, CondV: 5, CondU: 3}
	a, err := TwoLayerTeacher(cfg, NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := TwoLayerTeacher(cfg, NewRand(1))
	c, _ := TwoLayerTeacher(cfg, NewRand(2))
	for l := 0; l < 2; l++ {
		if !mat.Equal(a.Layers[l].Weight, b.Layers[l].Weight) {
			t.Errorf("layer %d differs for the same seed", l)
		}
		if mat.Equal(a.Layers[l].Weight, c.Layers[l].Weight) {
			t.Errorf("layer %d equal for different seeds", l)
		}
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if a.Layers[0].Act != nn.ReLU || a.Layers[1].Act != nn.Identity || a.Layers[0].Bias != nil || a.Layers[1].Bias != nil {
		t.Errorf("not a bias-free Linear → ReLU → Linear network: %+v", a.Layers)
	}
}

func unitRowsErr(v *mat.Dense) float64 {
	r, _ := v.Dims()
	worst := 0.0
	for i := 0; i < r; i++ {
		worst = math.Max(worst, math.Abs(mat.Norm(v.RowView(i), 2)-1))
	}
	return worst
}

func TestTwoLayerTeacherCondV(t *testing.T) {
	cases := []TwoLayerConfig{
		{D: 20, K: 5, M: 8, CondV: 5},
		{D: 20, K: 5, M: 8, CondV: 1.5},
		{D: 10, K: 10, M: 10, CondV: 100},
		{D: 50, K: 20, M: 3, CondV: 1e4},
		{D: 3, K: 2, M: 1, CondV: 2},
		{D: 30, K: 8, M: 8, CondV: 1e8},
	}
	for _, cfg := range cases {
		for seed := uint64(0); seed < 5; seed++ {
			net, err := TwoLayerTeacher(cfg, NewRand(seed))
			if err != nil {
				t.Fatalf("%+v seed %d: %v", cfg, seed, err)
			}
			v := net.Layers[0].Weight
			if r, c := v.Dims(); r != cfg.K || c != cfg.D {
				t.Fatalf("V is %d×%d", r, c)
			}
			if e := unitRowsErr(v); e > 1e-14 {
				t.Errorf("%+v seed %d: rows not unit (%.3g)", cfg, seed, e)
			}
			if k := mat.Cond(v, 2); math.Abs(k/cfg.CondV-1) > 0.01 { // gonum's SVD, independent of linalg
				t.Errorf("%+v seed %d: κ(V*) = %.6g, want %g ± 1%%", cfg, seed, k, cfg.CondV)
			}
		}
	}
	// CondV = 1: orthonormal rows, V·Vᵀ = I.
	net, err := TwoLayerTeacher(TwoLayerConfig{D: 9, K: 4, M: 4, CondV: 1}, NewRand(3))
	if err != nil {
		t.Fatal(err)
	}
	var g mat.Dense
	g.Mul(net.Layers[0].Weight, net.Layers[0].Weight.T())
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(g.At(i, j)-want) > 1e-14 {
				t.Fatalf("CondV = 1: V·Vᵀ[%d,%d] = %v", i, j, g.At(i, j))
			}
		}
	}
}

func TestTwoLayerTeacherCondU(t *testing.T) {
	for _, cfg := range []TwoLayerConfig{
		{D: 10, K: 5, M: 8, CondU: 20},
		{D: 10, K: 4, M: 2, CondU: 3}, // M < K: rank-deficient U*, κ over its 2 singular values
		{D: 6, K: 6, M: 6, CondU: 1},
	} {
		net, err := TwoLayerTeacher(cfg, NewRand(11))
		if err != nil {
			t.Fatal(err)
		}
		u := net.Layers[1].Weight
		if r, c := u.Dims(); r != cfg.M || c != cfg.K {
			t.Fatalf("U is %d×%d", r, c)
		}
		_, s, _, err := linalg.ThinSVD(u)
		if err != nil {
			t.Fatal(err)
		}
		p := min(cfg.M, cfg.K)
		if k := s[0] / s[p-1]; math.Abs(k/cfg.CondU-1) > 1e-10 {
			t.Errorf("%+v: κ(U*) = %.12g, want %g", cfg, k, cfg.CondU)
		}
		if f := mat.Norm(u, 2); math.Abs(f*f/float64(cfg.M)-1) > 1e-12 {
			t.Errorf("%+v: ‖U*‖_F² = %v, want %d", cfg, f*f, cfg.M)
		}
	}
}

func TestTwoLayerTeacherDefaults(t *testing.T) {
	net, err := TwoLayerTeacher(TwoLayerConfig{D: 60, K: 40, M: 50}, NewRand(5))
	if err != nil {
		t.Fatal(err)
	}
	if e := unitRowsErr(net.Layers[0].Weight); e > 1e-14 {
		t.Errorf("default V*: rows not unit (%.3g)", e)
	}
	// U* entries N(0, 1/k): mean of squares over 2000 entries is 1/40 ± ~3%.
	u := net.Layers[1].Weight
	f := mat.Norm(u, 2)
	if ms := f * f / 2000; math.Abs(ms*40-1) > 0.15 {
		t.Errorf("default U*: mean square %.4g, want 1/40", ms)
	}
}

func TestTwoLayerTeacherErrors(t *testing.T) {
	for _, cfg := range []TwoLayerConfig{
		{D: 3, K: 4, M: 4},                    // k > d
		{D: 0, K: 1, M: 1},                    // empty
		{D: 3, K: 2, M: 0},                    // empty
		{D: 3, K: 2, M: 2, CondV: 0.5},        // κ < 1
		{D: 3, K: 2, M: 2, CondV: math.NaN()}, // NaN
		{D: 3, K: 2, M: 2, CondU: math.Inf(1)},
		{D: 3, K: 1, M: 2, CondV: 3}, // one row: κ = 1
		{D: 3, K: 2, M: 1, CondU: 3}, // one singular value
		{D: 3, K: 2, M: 2, CondU: -1},
	} {
		if _, err := TwoLayerTeacher(cfg, NewRand(1)); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", cfg, err)
		}
	}
	if _, err := TwoLayerTeacher(TwoLayerConfig{D: 3, K: 2, M: 2}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil rng: %v", err)
	}
	// m < k is allowed.
	if _, err := TwoLayerTeacher(TwoLayerConfig{D: 5, K: 4, M: 1}, NewRand(1)); err != nil {
		t.Errorf("m < k: %v", err)
	}
}

func covOf(x *mat.Dense) *mat.SymDense {
	n, _ := x.Dims()
	var c mat.SymDense
	c.SymOuterK(1/float64(n), x.T())
	return &c
}

func TestGaussianInputs(t *testing.T) {
	const n, d = 200000, 5
	// Identity: X is exactly the row-major NormFloat64 stream.
	x, err := GaussianInputs(n, d, nil, NewRand(3))
	if err != nil {
		t.Fatal(err)
	}
	ref := NewRand(3)
	for i := 0; i < 10; i++ {
		if v := ref.NormFloat64(); x.At(i/d, i%d) != v {
			t.Fatalf("entry %d = %v, want the stream's %v", i, x.At(i/d, i%d), v)
		}
	}
	var diff mat.Dense
	diff.Sub(covOf(x), mat.NewDiagDense(d, []float64{1, 1, 1, 1, 1}))
	// ‖Σ̂ − I‖₂ ≈ 2√(d/n) = 0.01; allow 3×.
	if e := mat.Norm(&diff, 2); e > 0.03 {
		t.Errorf("identity covariance: ‖Σ̂ − I‖₂ = %.3g", e)
	}

	cov := RandomCovariance(d, 10, NewRand(4))
	x1, err := GaussianInputs(n, d, cov, NewRand(5))
	if err != nil {
		t.Fatal(err)
	}
	diff.Sub(covOf(x1), cov)
	if e := mat.Norm(&diff, 2) / mat.Norm(cov, 2); e > 0.03 {
		t.Errorf("‖Σ̂ − Σ‖₂/‖Σ‖₂ = %.3g", e)
	}
	// Same seed → same matrix, at any GOMAXPROCS.
	prev := runtime.GOMAXPROCS(1)
	x2, err := GaussianInputs(n, d, cov, NewRand(5))
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(x1, x2) {
		t.Error("GaussianInputs depends on GOMAXPROCS")
	}
}

func TestGaussianInputsErrors(t *testing.T) {
	notPD := mat.NewSymDense(2, []float64{1, 2, 2, 1})
	if _, err := GaussianInputs(10, 2, notPD, NewRand(1)); !errors.Is(err, ErrNotPositiveDefinite) {
		t.Errorf("indefinite cov: %v", err)
	}
	if _, err := GaussianInputs(10, 3, mat.NewSymDense(2, []float64{1, 0, 0, 1}), NewRand(1)); !errors.Is(err, ErrShape) {
		t.Errorf("cov size: %v", err)
	}
	if _, err := GaussianInputs(10, 1, mat.NewSymDense(1, []float64{math.NaN()}), NewRand(1)); !errors.Is(err, ErrNotFinite) {
		t.Errorf("NaN cov: %v", err)
	}
	if _, err := GaussianInputs(0, 3, nil, NewRand(1)); !errors.Is(err, ErrConfig) {
		t.Errorf("n = 0: %v", err)
	}
	if _, err := GaussianInputs(3, 3, nil, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil rng: %v", err)
	}
}

func TestRandomCovariance(t *testing.T) {
	c := RandomCovariance(6, 1000, NewRand(9))
	var e mat.EigenSym
	if !e.Factorize(c, false) {
		t.Fatal("eigen failed")
	}
	lam := e.Values(nil)
	for i, l := range lam {
		want := math.Pow(1000, float64(i)/5)
		if math.Abs(l/want-1) > 1e-12 {
			t.Errorf("λ%d = %v, want %v", i, l, want)
		}
	}
	if RandomCovariance(0, 2, NewRand(1)) != nil || RandomCovariance(3, 0.5, NewRand(1)) != nil ||
		RandomCovariance(3, math.NaN(), NewRand(1)) != nil || RandomCovariance(3, 2, nil) != nil {
		t.Error("invalid arguments should give nil")
	}
	if one := RandomCovariance(1, 5, NewRand(1)); one == nil || one.At(0, 0) != 1 {
		t.Errorf("d = 1: %v", one)
	}
}

func naiveForward(net *nn.MLP, x *mat.Dense) *mat.Dense {
	var h, y mat.Dense
	h.Mul(x, net.Layers[0].Weight.T())
	h.Apply(func(_, _ int, v float64) float64 { return math.Max(v, 0) }, &h)
	y.Mul(&h, net.Layers[1].Weight.T())
	return &y
}

func TestTwoLayerData(t *testing.T) {
	net, err := TwoLayerTeacher(TwoLayerConfig{D: 7, K: 4, M: 3, CondV: 3}, NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := GaussianInputs(100000, 7, nil, NewRand(2))
	clean, sigma, err := TwoLayerData(net, x, Noise{}, nil)
	if err != nil || sigma != 0 {
		t.Fatalf("no noise: σ = %v, err = %v", sigma, err)
	}
	ref := naiveForward(net, x)
	var diff mat.Dense
	diff.Sub(clean, ref)
	if e := mat.Norm(&diff, math.Inf(1)) / mat.Norm(ref, math.Inf(1)); e > 1e-14 {
		t.Errorf("forward pass differs from ReLU(X·Vᵀ)·Uᵀ by %.3g", e)
	}
	n, m := clean.Dims()
	rms := mat.Norm(clean, 2) / math.Sqrt(float64(n*m))

	for _, kind := range []string{NoiseGaussian, NoiseSubGaussian} {
		y, sigma, err := TwoLayerData(net, x, Noise{Kind: kind, Level: 0.1}, NewRand(3))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(sigma/(0.1*rms)-1) > 1e-12 {
			t.Errorf("%s: σ = %v, want 0.1·RMS = %v", kind, sigma, 0.1*rms)
		}
		diff.Sub(y, clean)
		e := diff.RawMatrix().Data
		var sum, sq, pos float64
		for _, v := range e {
			sum += v
			sq += v * v
			if v > 0 {
				pos++
			}
			if kind == NoiseSubGaussian && math.Abs(math.Abs(v)-sigma) > 1e-12*sigma+1e-15*rms {
				t.Fatalf("subgaussian: |noise| = %v, want exactly σ = %v", math.Abs(v), sigma)
			}
		}
		N := float64(len(e))
		// Sample std within 2% (its relative sd is ≈ 1/√(2N) = 0.1%); mean
		// within 5 standard errors.
		if sd := math.Sqrt(sq / N); math.Abs(sd/sigma-1) > 0.02 {
			t.Errorf("%s: empirical noise sd %.5g, want σ = %.5g", kind, sd, sigma)
		}
		if mean := sum / N; math.Abs(mean) > 5*sigma/math.Sqrt(N) {
			t.Errorf("%s: noise mean %.3g", kind, mean)
		}
		if f := pos / N; math.Abs(f-0.5) > 0.01 {
			t.Errorf("%s: fraction positive %.4f", kind, f)
		}
	}

	// Same result at any GOMAXPROCS.
	y2, s2, _ := TwoLayerData(net, x, Noise{Kind: NoiseGaussian, Level: 0.1}, NewRand(3))
	prev := runtime.GOMAXPROCS(1)
	y1, s1, _ := TwoLayerData(net, x, Noise{Kind: NoiseGaussian, Level: 0.1}, NewRand(3))
	runtime.GOMAXPROCS(prev)
	if s1 != s2 || !mat.Equal(y1, y2) {
		t.Error("TwoLayerData depends on GOMAXPROCS")
	}
}

func TestTwoLayerDataErrors(t *testing.T) {
	net, _ := TwoLayerTeacher(TwoLayerConfig{D: 4, K: 2, M: 2}, NewRand(1))
	x, _ := GaussianInputs(10, 4, nil, NewRand(2))
	xBad, _ := GaussianInputs(10, 3, nil, NewRand(2))
	xNaN := mat.DenseCopyOf(x)
	xNaN.Set(7, 1, math.NaN())
	biased := nn.NewTwoLayer(net.Layers[0].Weight, net.Layers[1].Weight)
	biased.Layers[1].Bias = []float64{1, 0}
	cases := []struct {
		name  string
		net   *nn.MLP
		x     *mat.Dense
		noise Noise
		want  error
	}{
		{"x columns", net, xBad, Noise{}, ErrShape},
		{"nil x", net, nil, Noise{}, ErrShape},
		{"nil teacher", nil, x, Noise{}, ErrShape},
		{"bias", biased, x, Noise{}, ErrShape},
		{"NaN x", net, xNaN, Noise{}, ErrNotFinite},
		{"unknown kind", net, x, Noise{Kind: "laplace", Level: 0.1}, ErrConfig},
		{"level without kind", net, x, Noise{Level: 0.1}, ErrConfig},
		{"negative level", net, x, Noise{Kind: NoiseGaussian, Level: -1}, ErrConfig},
		{"NaN level", net, x, Noise{Kind: NoiseGaussian, Level: math.NaN()}, ErrConfig},
	}
	for _, tc := range cases {
		if _, _, err := TwoLayerData(tc.net, tc.x, tc.noise, NewRand(1)); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, _, err := TwoLayerData(net, x, Noise{Kind: NoiseGaussian, Level: 0.1}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil rng with noise: %v", err)
	}
}

// BenchmarkGaussianInputs1e6x30 draws the largest routine input of the two-layer tests.
// Floor: 3e7 NormFloat64 draws (~3–4 ns each in math/rand/v2, sequential by
// design so the stream is reproducible) ≈ 0.1 s; 240 MB written once.
func BenchmarkGaussianInputs1e6x30(b *testing.B) {
	rng := NewRand(1)
	for b.Loop() {
		if _, err := GaussianInputs(1_000_000, 30, nil, rng); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGaussianInputsCov1e6x30 adds the Cholesky transform X = Z·Lᵀ,
// done as a dense gemm per chunk (3× faster than the triangular scalar loop
// in pure Go): 2·n·d² = 1.8e9 flops ≈ 0.11 s at 16 GFLOP/s, parallel over
// row chunks, on top of the draws.
func BenchmarkGaussianInputsCov1e6x30(b *testing.B) {
	rng := NewRand(1)
	cov := RandomCovariance(30, 10, rng)
	for b.Loop() {
		if _, err := GaussianInputs(1_000_000, 30, cov, rng); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTwoLayerData1e6 is the forward pass at n = 1e6, d = 30, k = 10,
// m = 8 with Gaussian noise. Floor: 2n(dk + km) = 7.6e8 flops ≈ 0.05 s at
// 16 GFLOP/s; 8e6 noise draws ≈ 0.03 s; 240 MB read.
func BenchmarkTwoLayerData1e6(b *testing.B) {
	rng := NewRand(1)
	net, err := TwoLayerTeacher(TwoLayerConfig{D: 30, K: 10, M: 8, CondV: 5}, rng)
	if err != nil {
		b.Fatal(err)
	}
	x, _ := GaussianInputs(1_000_000, 30, nil, rng)
	for b.Loop() {
		if _, _, err := TwoLayerData(net, x, Noise{Kind: NoiseGaussian, Level: 0.1}, rng); err != nil {
			b.Fatal(err)
		}
	}
}
