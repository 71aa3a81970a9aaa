package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/nn"
)

// Noise kinds accepted by Noise.Kind.
const (
	NoiseNone        = "none"        // no noise ("" means the same)
	NoiseGaussian    = "gaussian"    // i.i.d. N(0, σ²)
	NoiseSubGaussian = "subgaussian" // i.i.d. Rademacher ±σ: bounded, same variance
)

// Noise is additive label noise E in A = U*·f(V*·X) + E ([BJW19, §5]).
type Noise struct {
	// Kind is NoiseNone ("none" or ""), NoiseGaussian ("gaussian") or
	// NoiseSubGaussian ("subgaussian", Rademacher ±σ: the bounded case of
	// the paper's sub-Gaussian assumption, with the same variance as the
	// Gaussian).
	Kind string
	// Level is the noise standard deviation σ relative to the RMS of the
	// clean outputs: 0.1 means "noise at 10% of the output scale". It must
	// be finite and ≥ 0, and 0 when Kind is none.
	Level float64
}

func (nz Noise) validate() error {
	if math.IsNaN(nz.Level) || math.IsInf(nz.Level, 0) || nz.Level < 0 {
		return fmt.Errorf("%w: noise level %v must be finite and ≥ 0", ErrConfig, nz.Level)
	}
	switch nz.Kind {
	case "", NoiseNone:
		if nz.Level != 0 {
			return fmt.Errorf("%w: noise level %v given but noise kind is %q; set Kind to %q or %q", ErrConfig, nz.Level, nz.Kind, NoiseGaussian, NoiseSubGaussian)
		}
	case NoiseGaussian, NoiseSubGaussian:
	default:
		return fmt.Errorf("%w: unknown noise kind %q (want %q, %q or %q)", ErrConfig, nz.Kind, NoiseNone, NoiseGaussian, NoiseSubGaussian)
	}
	return nil
}

// TwoLayerData returns the labels y = ReLU(x·Vᵀ)·Uᵀ + E of a bias-free
// two-layer ReLU teacher on the rows of x (n×d), and the absolute noise
// standard deviation σ = noise.Level · RMS(clean y) that was used (0 without
// noise). A teacher whose hidden activation is another rectified one
// (nn.RectPow, nn.RectExp) gives y = φ(x·Vᵀ)·Uᵀ + E; an overflowing φ is
// reported as ErrNotFinite.
//
// The forward pass is computed here (not by nn) in parallel over fixed
// chunks of 2048 rows; the RMS sums per-chunk partial sums in chunk order, so
// y and σ are the same at any GOMAXPROCS. Noise draws come from rng after the
// forward pass, one per entry in row-major order: rng.NormFloat64 for
// "gaussian"; for "subgaussian", the bits of successive rng.Uint64 values,
// least significant first, entry i taking bit i%64 of word i/64 (1 → +σ).
// rng may be nil when there is no noise.
func TwoLayerData(teacher *nn.MLP, x *mat.Dense, noise Noise, rng *rand.Rand) (y *mat.Dense, sigma float64, err error) {
	v, u, err := twoLayer(teacher)
	if err != nil {
		return nil, 0, fmt.Errorf("synth.TwoLayerData: %w", err)
	}
	act := teacher.Layers[0].Act
	phi := act.Func()
	if err := noise.validate(); err != nil {
		return nil, 0, fmt.Errorf("synth.TwoLayerData: %w", err)
	}
	noisy := noise.Kind == NoiseGaussian || noise.Kind == NoiseSubGaussian
	if noisy && rng == nil {
		return nil, 0, fmt.Errorf("synth.TwoLayerData: %w: rng is nil", ErrConfig)
	}
	if x == nil || x.IsEmpty() {
		return nil, 0, fmt.Errorf("synth.TwoLayerData: %w: x is nil or empty", ErrShape)
	}
	n, d := x.Dims()
	k, dv := v.Dims()
	m, _ := u.Dims()
	if d != dv {
		return nil, 0, fmt.Errorf("synth.TwoLayerData: %w: x has %d columns, the teacher takes %d inputs", ErrShape, d, dv)
	}

	out := mat.NewDense(n, m, nil)
	nc := (n + chunkRows - 1) / chunkRows
	partial := make([]float64, nc) // per-chunk Σ y², reduced in order below
	bad := make([]int, nc)         // per-chunk first row with a non-finite output, or −1
	parallel.For(nc, func(_, c int) {
		h := make([]float64, k) // hidden activations of one row
		bad[c] = -1
		ss := 0.0
		for r := c * chunkRows; r < min(n, (c+1)*chunkRows); r++ {
			xr := x.RawRowView(r)
			for l := 0; l < k; l++ {
				if act == nn.ReLU {
					h[l] = math.Max(floats.Dot(v.RawRowView(l), xr), 0)
				} else {
					h[l] = phi(floats.Dot(v.RawRowView(l), xr))
				}
			}
			yr := out.RawRowView(r)
			for j := 0; j < m; j++ {
				yr[j] = floats.Dot(u.RawRowView(j), h)
				ss += yr[j] * yr[j]
			}
			if math.IsNaN(ss) || math.IsInf(ss, 0) {
				if bad[c] < 0 {
					bad[c] = r
				}
			}
		}
		partial[c] = ss
	})
	total := 0.0
	for c := range partial {
		if bad[c] >= 0 {
			return nil, 0, fmt.Errorf("synth.TwoLayerData: %w: non-finite output at row %d (check x for NaN/Inf; with %s, weights too large overflow)", ErrNotFinite, bad[c], act)
		}
		total += partial[c]
	}
	if !noisy {
		return out, 0, nil
	}
	sigma = noise.Level * math.Sqrt(total/float64(n*m))
	data := out.RawMatrix().Data // contiguous: out was just allocated
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
	return out, sigma, nil
}

// twoLayer returns (V, U) of a bias-free two-layer ReLU network.
func twoLayer(net *nn.MLP) (v, u *mat.Dense, err error) {
	if net == nil {
		return nil, nil, fmt.Errorf("%w: teacher is nil", ErrShape)
	}
	if len(net.Layers) != 2 {
		return nil, nil, fmt.Errorf("%w: teacher has %d layers, want 2 (Linear → ReLU → Linear)", ErrShape, len(net.Layers))
	}
	if err := net.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: teacher: %w", ErrShape, err)
	}
	l0, l1 := net.Layers[0], net.Layers[1]
	if !l0.Act.Rectified() || l1.Act != nn.Identity {
		return nil, nil, fmt.Errorf("%w: teacher has activations (%s, %s), want (relu, identity) or another rectified activation (relupow<c>, reluexp) then identity", ErrShape, l0.Act, l1.Act)
	}
	for i, l := range net.Layers {
		for _, b := range l.Bias {
			if b != 0 {
				return nil, nil, fmt.Errorf("%w: teacher layer %d has a non-zero bias; TwoLayerData is for bias-free teachers", ErrShape, i)
			}
		}
	}
	return l0.Weight, l1.Weight, nil
}
