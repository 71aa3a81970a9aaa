package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/nn"
)

// Depth2Config describes a random depth-2 ReLU teacher with biases,
// y = A·ReLU(W·x + b) (+ c), the model of [ATV21], in the paper's "B-bounded" normalisation: unit rows w_i,
// |a_i| ∈ [AMin, AMax], |b_i| ≤ BiasMax.
type Depth2Config struct {
	// D is the input dimension d; M the number of hidden units m (M > D is
	// the overcomplete case, which needs ℓ = 2 and M ≤ D(D+1)/2).
	D, M int
	// Outputs is the number of outputs p (default 1, the paper's model).
	Outputs int
	// BiasMax bounds the biases: b_i uniform in [−BiasMax, BiasMax].
	// Default 1. Ignored when Biases is set.
	BiasMax float64
	// Biases, if non-nil, gives the M biases explicitly.
	Biases []float64
	// AMin, AMax bound the output weights: each A_{ti} has magnitude uniform
	// in [AMin, AMax] and a random sign. Defaults 0.5 and 2.
	AMin, AMax float64
	// MinSeparation, if > 0, redraws W until every pair of rows satisfies
	// min‖w_i ∓ w_j‖ ≥ MinSeparation (no two units nearly parallel up to
	// sign, which the overcomplete case needs to tell them apart). At most
	// 1000 redraws.
	MinSeparation float64
	// Smoothing τ > 0 perturbs W by N(0, τ²/d) entries before the rows are
	// normalised: the smoothed-analysis instances of [ATV21, App. E].
	Smoothing float64
	// OutputBias draws an output bias c_t ~ N(0, 1) when true (else 0).
	OutputBias bool
}

func (cfg Depth2Config) withDefaults() Depth2Config {
	if cfg.Outputs == 0 {
		cfg.Outputs = 1
	}
	if cfg.BiasMax == 0 && cfg.Biases == nil {
		cfg.BiasMax = 1
	}
	if cfg.AMin == 0 && cfg.AMax == 0 {
		cfg.AMin, cfg.AMax = 0.5, 2
	}
	return cfg
}

func (cfg Depth2Config) validate() error {
	if cfg.D < 1 || cfg.M < 1 || cfg.Outputs < 1 {
		return fmt.Errorf("%w: D = %d, M = %d, Outputs = %d, all must be ≥ 1", ErrConfig, cfg.D, cfg.M, cfg.Outputs)
	}
	if cfg.Biases != nil && len(cfg.Biases) != cfg.M {
		return fmt.Errorf("%w: %d biases for M = %d units", ErrConfig, len(cfg.Biases), cfg.M)
	}
	for _, v := range append([]float64{cfg.BiasMax, cfg.AMin, cfg.AMax, cfg.MinSeparation, cfg.Smoothing}, cfg.Biases...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: non-finite parameter %v", ErrConfig, v)
		}
	}
	if cfg.BiasMax < 0 || cfg.AMin < 0 || cfg.AMax < cfg.AMin || cfg.MinSeparation < 0 || cfg.Smoothing < 0 {
		return fmt.Errorf("%w: need BiasMax ≥ 0, 0 ≤ AMin ≤ AMax, MinSeparation ≥ 0, Smoothing ≥ 0 (got %g, %g, %g, %g, %g)", ErrConfig, cfg.BiasMax, cfg.AMin, cfg.AMax, cfg.MinSeparation, cfg.Smoothing)
	}
	if cfg.MinSeparation > math.Sqrt2 {
		return fmt.Errorf("%w: MinSeparation %g > √2 cannot hold for two unit vectors up to sign", ErrConfig, cfg.MinSeparation)
	}
	return nil
}

// Depth2Teacher draws a depth-2 teacher as an nn.MLP Linear(d→m, bias) →
// ReLU → Linear(m→p, bias) (PyTorch keys 0.weight, 0.bias, 2.weight,
// 2.bias). Draw order from rng: W (m·d Gaussians, row-major; redrawn as a
// whole while MinSeparation fails; plus m·d perturbations when Smoothing >
// 0), then b (m uniforms, unless Biases), then A (for each entry a uniform
// magnitude and a sign bit, row-major), then c (p Gaussians if OutputBias).
func Depth2Teacher(cfg Depth2Config, rng *rand.Rand) (*nn.MLP, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("synth.Depth2Teacher: %w", err)
	}
	if rng == nil {
		return nil, fmt.Errorf("synth.Depth2Teacher: %w: rng is nil", ErrConfig)
	}
	m, d, p := cfg.M, cfg.D, cfg.Outputs
	W := mat.NewDense(m, d, nil)
	for try := 0; ; try++ {
		data := W.RawMatrix().Data
		for i := range data {
			data[i] = rng.NormFloat64()
		}
		if cfg.Smoothing > 0 {
			s := cfg.Smoothing / math.Sqrt(float64(d))
			for i := range data {
				data[i] += s * rng.NormFloat64()
			}
		}
		if normaliseRows(W) && separated(W, cfg.MinSeparation) {
			break
		}
		if try >= 1000 {
			return nil, fmt.Errorf("synth.Depth2Teacher: %w: no draw of %d unit rows in R^%d kept every pair %g apart up to sign", ErrConfig, m, d, cfg.MinSeparation)
		}
	}
	b := make([]float64, m)
	if cfg.Biases != nil {
		copy(b, cfg.Biases)
	} else {
		for i := range b {
			b[i] = cfg.BiasMax * (2*rng.Float64() - 1)
		}
	}
	A := mat.NewDense(p, m, nil)
	for t := 0; t < p; t++ {
		for i := 0; i < m; i++ {
			a := cfg.AMin + (cfg.AMax-cfg.AMin)*rng.Float64()
			if rng.Uint64()&1 == 1 {
				a = -a
			}
			A.Set(t, i, a)
		}
	}
	c := make([]float64, p)
	if cfg.OutputBias {
		for t := range c {
			c[t] = rng.NormFloat64()
		}
	}
	return &nn.MLP{Layers: []nn.Layer{
		{Weight: W, Bias: b, Act: nn.ReLU},
		{Weight: A, Bias: c, Act: nn.Identity},
	}}, nil
}

// separated reports min‖w_i ∓ w_j‖ ≥ sep for every pair of unit rows.
func separated(W *mat.Dense, sep float64) bool {
	if sep <= 0 {
		return true
	}
	m, _ := W.Dims()
	for i := 0; i < m; i++ {
		for j := 0; j < i; j++ {
			c := math.Abs(mat.Dot(W.RowView(i), W.RowView(j)))
			if math.Sqrt(math.Max(0, 2-2*c)) < sep {
				return false
			}
		}
	}
	return true
}

// Depth2Data returns Y = teacher(X) + noise for a depth-2 teacher with
// biases (any nn.MLP Linear → ReLU → Linear), with the noise conventions of
// TwoLayerData: σ = noise.Level × the RMS of the clean outputs, Gaussian or
// Rademacher ±σ, drawn from rng in row-major order after the clean outputs
// are computed. It returns Y and the absolute σ. The clean outputs come from
// nn.MLP.Forward, which is deterministic at any GOMAXPROCS.
func Depth2Data(teacher *nn.MLP, x *mat.Dense, noise Noise, rng *rand.Rand) (*mat.Dense, float64, error) {
	if teacher == nil || len(teacher.Layers) != 2 {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: teacher must be Linear → ReLU → Linear", ErrShape)
	}
	if err := teacher.Validate(); err != nil {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: %w", ErrShape, err)
	}
	if teacher.Layers[0].Act != nn.ReLU || teacher.Layers[1].Act != nn.Identity {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: teacher activations (%s, %s), want (relu, identity)", ErrShape, teacher.Layers[0].Act, teacher.Layers[1].Act)
	}
	if err := noise.validate(); err != nil {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w", err)
	}
	noisy := noise.Kind == NoiseGaussian || noise.Kind == NoiseSubGaussian
	if noisy && rng == nil {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: rng is nil", ErrConfig)
	}
	if x == nil || x.IsEmpty() {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: x is nil or empty", ErrShape)
	}
	n, d := x.Dims()
	if d != teacher.In() {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: x has %d columns, the teacher takes %d inputs", ErrShape, d, teacher.In())
	}
	if !allFinite(x) {
		return nil, 0, fmt.Errorf("synth.Depth2Data: %w: x has a NaN or Inf", ErrNotFinite)
	}
	y := teacher.Forward(x)
	if !noisy {
		return y, 0, nil
	}
	p := teacher.Out()
	nc := (n + chunkRows - 1) / chunkRows
	partial := make([]float64, nc)
	parallel.For(nc, func(_, c int) {
		s := 0.0
		for r := c * chunkRows; r < min(n, (c+1)*chunkRows); r++ {
			for _, v := range y.RawRowView(r) {
				s += v * v
			}
		}
		partial[c] = s
	})
	total := 0.0
	for _, s := range partial {
		total += s
	}
	sigma := noise.Level * math.Sqrt(total/float64(n*p))
	data := y.RawMatrix().Data
	switch noise.Kind {
	case NoiseGaussian:
		for i := range data {
			data[i] += sigma * rng.NormFloat64()
		}
	case NoiseSubGaussian:
		var word uint64
		for i := range data {
			if i%64 == 0 {
				word = rng.Uint64()
			}
			if word&1 == 1 {
				data[i] += sigma
			} else {
				data[i] -= sigma
			}
			word >>= 1
		}
	}
	return y, sigma, nil
}

func allFinite(m *mat.Dense) bool {
	r, _ := m.Dims()
	for i := 0; i < r; i++ {
		for _, v := range m.RawRowView(i) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}
