package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/density"
)

// GenerativeConfig describes an instance of the ReLU generative model of
// Mazumdar and Rawat [MR18, §3], Y = ReLU(A·C + b·1ᵀ) in the paper's
// columns, stored here with observations as rows: Y = ReLU(C·Aᵀ + 1·bᵀ).
type GenerativeConfig struct {
	// D is the observed dimension d (neurons), K the latent dimension k,
	// N the number of observations n. Required: 1 ≤ K < min(D, N).
	D, K, N int
	// Bias is the density of the iid bias coordinates b_i. Default N(0, 1).
	Bias density.Density
	// CodeStd is the standard deviation of the iid Gaussian codes C.
	// Default 1/√k, so that M = C·Aᵀ has entries ≈ N(0, 1).
	CodeStd float64
	// Noise is the standard deviation of iid Gaussian noise added to the
	// pre-activations before the ReLU (0 = noiseless, the paper's model).
	Noise float64
}

// GenerativeInstance is a generated problem and its truth.
type GenerativeInstance struct {
	A *mat.Dense // d×k generator weights (the nn.Linear(k→d) layout)
	C *mat.Dense // n×k codes, one row per observation
	B []float64  // bias, length d, shared by every observation
	M *mat.Dense // n×d, M = C·Aᵀ (the paper's AC, transposed)
	Y *mat.Dense // n×d observations ReLU(M + 1·bᵀ [+ noise])
}

// GenerativeData draws an instance. Stream: A (d·k rng.NormFloat64, row-major),
// then C (n·k, row-major, scaled by CodeStd), then b (d draws of
// density.Sample), then the noise (n·d NormFloat64, only when Noise > 0).
func GenerativeData(cfg GenerativeConfig, rng *rand.Rand) (*GenerativeInstance, error) {
	if rng == nil {
		return nil, fmt.Errorf("synth.GenerativeData: %w: rng is nil", ErrConfig)
	}
	if cfg.K < 1 || cfg.D <= cfg.K || cfg.N <= cfg.K {
		return nil, fmt.Errorf("synth.GenerativeData: %w: need 1 ≤ k < min(d, n), got d=%d, k=%d, n=%d", ErrConfig, cfg.D, cfg.K, cfg.N)
	}
	if cfg.N > math.MaxInt/8/cfg.D {
		return nil, fmt.Errorf("synth.GenerativeData: %w: n·d = %d·%d entries do not fit in memory", ErrConfig, cfg.N, cfg.D)
	}
	if math.IsNaN(cfg.Noise) || math.IsInf(cfg.Noise, 0) || cfg.Noise < 0 || math.IsNaN(cfg.CodeStd) || math.IsInf(cfg.CodeStd, 0) || cfg.CodeStd < 0 {
		return nil, fmt.Errorf("synth.GenerativeData: %w: noise %v and code std %v must be finite and ≥ 0", ErrConfig, cfg.Noise, cfg.CodeStd)
	}
	bias := cfg.Bias
	if bias == nil {
		bias = density.Gaussian{Mean: 0, Std: 1}
	}
	if err := density.Validate(bias); err != nil {
		return nil, fmt.Errorf("synth.GenerativeData: %w: %w", ErrConfig, err)
	}
	cs := cfg.CodeStd
	if cs == 0 {
		cs = 1 / math.Sqrt(float64(cfg.K))
	}
	d, k, n := cfg.D, cfg.K, cfg.N
	in := &GenerativeInstance{A: mat.NewDense(d, k, nil), C: mat.NewDense(n, k, nil), B: make([]float64, d)}
	for i, a := 0, in.A.RawMatrix().Data; i < len(a); i++ {
		a[i] = rng.NormFloat64()
	}
	for i, c := 0, in.C.RawMatrix().Data; i < len(c); i++ {
		c[i] = cs * rng.NormFloat64()
	}
	for i := range in.B {
		in.B[i] = density.Sample(bias, rng)
	}
	in.M = mat.NewDense(n, d, nil)
	in.M.Mul(in.C, in.A.T())
	in.Y = mat.NewDense(n, d, nil)
	m, y := in.M.RawMatrix().Data, in.Y.RawMatrix().Data
	for j := 0; j < n; j++ {
		for i := 0; i < d; i++ {
			z := m[j*d+i] + in.B[i]
			if cfg.Noise > 0 {
				z += cfg.Noise * rng.NormFloat64()
			}
			y[j*d+i] = math.Max(z, 0)
		}
	}
	return in, nil
}

// RobustConfig describes observations for robust recovery [MR18, §4, (46)]:
// v = ReLU(A·c* + b) + e* + w for n codes c* (unit norm) through one Gaussian
// A (d×k) and one bias b.
type RobustConfig struct {
	// D observed dimension, K code dimension (K < D), N observations (≥ 1).
	D, K, N int
	// Bias is the density of b's iid coordinates. Default N(0, 0.5²).
	Bias density.Density
	// S is the number of outliers per observation (0 ≤ S ≤ D), placed
	// uniformly at random, each of magnitude Magnitude·U[0.5, 1.5] with a
	// random sign.
	S         int
	Magnitude float64
	// Delta bounds the dense noise: w_i ~ U[−δ, δ] independent of A, or,
	// with AlignedNoise, w = δ·sign(A·u) for one fixed random unit u (the
	// adversarial case [MR18, §4] leaves open, whose error does not vanish with d).
	Delta        float64
	AlignedNoise bool
}

// RobustInstance is a generated robust-recovery problem and its truth.
type RobustInstance struct {
	A *mat.Dense // d×k, iid N(0, 1)
	B []float64  // bias, length d
	C *mat.Dense // n×k true codes, unit rows
	E *mat.Dense // n×d outliers (s nonzeros per row)
	W *mat.Dense // n×d dense noise
	V *mat.Dense // n×d observations
}

// RobustData draws an instance. Stream: A (d·k NormFloat64), b (d
// density.Sample), then per observation: the code (k NormFloat64,
// normalised), the outlier positions (rng.Perm(d)[:s]), magnitudes and signs
// (two Float64 per outlier), and the noise (d Float64; with AlignedNoise the
// direction u is drawn once, after b, as k NormFloat64).
func RobustData(cfg RobustConfig, rng *rand.Rand) (*RobustInstance, error) {
	if rng == nil {
		return nil, fmt.Errorf("synth.RobustData: %w: rng is nil", ErrConfig)
	}
	if cfg.K < 1 || cfg.D <= cfg.K || cfg.N < 1 || cfg.S < 0 || cfg.S > cfg.D {
		return nil, fmt.Errorf("synth.RobustData: %w: need 1 ≤ k < d, n ≥ 1, 0 ≤ s ≤ d; got d=%d, k=%d, n=%d, s=%d", ErrConfig, cfg.D, cfg.K, cfg.N, cfg.S)
	}
	if cfg.N > math.MaxInt/8/cfg.D {
		return nil, fmt.Errorf("synth.RobustData: %w: n·d = %d·%d entries do not fit in memory", ErrConfig, cfg.N, cfg.D)
	}
	for _, x := range []float64{cfg.Magnitude, cfg.Delta} {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil, fmt.Errorf("synth.RobustData: %w: outlier magnitude %v and noise bound %v must be finite and ≥ 0", ErrConfig, cfg.Magnitude, cfg.Delta)
		}
	}
	bias := cfg.Bias
	if bias == nil {
		bias = density.Gaussian{Mean: 0, Std: 0.5}
	}
	if err := density.Validate(bias); err != nil {
		return nil, fmt.Errorf("synth.RobustData: %w: %w", ErrConfig, err)
	}
	d, k, n := cfg.D, cfg.K, cfg.N
	in := &RobustInstance{A: mat.NewDense(d, k, nil), B: make([]float64, d), C: mat.NewDense(n, k, nil),
		E: mat.NewDense(n, d, nil), W: mat.NewDense(n, d, nil), V: mat.NewDense(n, d, nil)}
	for i, a := 0, in.A.RawMatrix().Data; i < len(a); i++ {
		a[i] = rng.NormFloat64()
	}
	for i := range in.B {
		in.B[i] = density.Sample(bias, rng)
	}
	var alignedSign []float64
	if cfg.AlignedNoise {
		u := make([]float64, k)
		for j := range u {
			u[j] = rng.NormFloat64()
		}
		au := mat.NewVecDense(d, nil)
		au.MulVec(in.A, mat.NewVecDense(k, u))
		alignedSign = make([]float64, d)
		for i := range alignedSign {
			if au.AtVec(i) >= 0 {
				alignedSign[i] = 1
			} else {
				alignedSign[i] = -1
			}
		}
	}
	ac := make([]float64, d)
	for j := 0; j < n; j++ {
		c := in.C.RawRowView(j)
		nrm := 0.0
		for l := range c {
			c[l] = rng.NormFloat64()
			nrm += c[l] * c[l]
		}
		nrm = math.Sqrt(nrm)
		for l := range c {
			c[l] /= nrm
		}
		e := in.E.RawRowView(j)
		for _, i := range rng.Perm(d)[:cfg.S] {
			mag := cfg.Magnitude * (0.5 + rng.Float64())
			if rng.Float64() < 0.5 {
				mag = -mag
			}
			e[i] = mag
		}
		w := in.W.RawRowView(j)
		for i := range w {
			if cfg.AlignedNoise {
				w[i] = cfg.Delta * alignedSign[i]
			} else {
				w[i] = cfg.Delta * (2*rng.Float64() - 1)
			}
		}
		for i := 0; i < d; i++ {
			ac[i] = 0
			for l, a := range in.A.RawRowView(i) {
				ac[i] += a * c[l]
			}
		}
		v := in.V.RawRowView(j)
		for i := range v {
			v[i] = math.Max(ac[i]+in.B[i], 0) + e[i] + w[i]
		}
	}
	return in, nil
}

// FractionPositive is the fraction of the entries of Y that are > 0.
func (in *GenerativeInstance) FractionPositive() float64 {
	n, d := in.Y.Dims()
	pos := 0
	for _, v := range in.Y.RawMatrix().Data {
		if v > 0 {
			pos++
		}
	}
	return float64(pos) / float64(n*d)
}
