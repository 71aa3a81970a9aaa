package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// SparseCorruption describes the sparse noise of Bakshi et al. §8 (Def 12):
// s = round(Frac·n·m) entries of Y, at positions drawn uniformly at random
// without replacement, receive an additive corruption of arbitrary size.
type SparseCorruption struct {
	// Frac is γ, the fraction of corrupted entries, in [0, 1).
	Frac float64
	// Min and Max bound the corruption magnitudes relative to the RMS of
	// the clean Y: each corruption is ±U(Min, Max)·rms(Y) with a random
	// sign. Defaults 5 and 10 ("large values"); 0 ≤ Min ≤ Max.
	Min, Max float64
}

// CorruptSparse returns a corrupted copy of y (n×m) and the row-major mask
// (n·m entries) of the corrupted positions. Stream: positions by rejection
// sampling (one rng.IntN(n·m) per draw, repeated draws of a used position
// are discarded), then for each corrupted position in draw order a
// magnitude (rng.Float64) and a sign (rng.Float64 < 0.5 is negative).
func CorruptSparse(y *mat.Dense, c SparseCorruption, rng *rand.Rand) (*mat.Dense, []bool, error) {
	if y == nil || y.IsEmpty() {
		return nil, nil, fmt.Errorf("%w: Y is nil or empty", ErrShape)
	}
	if rng == nil {
		return nil, nil, fmt.Errorf("%w: nil random source", ErrConfig)
	}
	if c.Min == 0 && c.Max == 0 {
		c.Min, c.Max = 5, 10
	}
	if !(c.Frac >= 0 && c.Frac < 1) || !(c.Min >= 0 && c.Max >= c.Min) || math.IsInf(c.Max, 0) {
		return nil, nil, fmt.Errorf("%w: sparse corruption needs 0 ≤ Frac < 1 and 0 ≤ Min ≤ Max < ∞, got %+v", ErrConfig, c)
	}
	n, m := y.Dims()
	out := mat.DenseCopyOf(y)
	data := out.RawMatrix().Data
	rms := 0.0
	for _, v := range data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("%w: Y has a non-finite entry", ErrNotFinite)
		}
		rms += v * v
	}
	rms = math.Sqrt(rms / float64(len(data)))
	s := int(math.Round(c.Frac * float64(n*m)))
	mask := make([]bool, n*m)
	pos := make([]int, 0, s)
	for len(pos) < s {
		p := rng.IntN(n * m)
		if !mask[p] {
			mask[p] = true
			pos = append(pos, p)
		}
	}
	for _, p := range pos {
		mag := (c.Min + (c.Max-c.Min)*rng.Float64()) * rms
		if rng.Float64() < 0.5 {
			mag = -mag
		}
		data[p] += mag
	}
	return out, mask, nil
}

// IncoherentOrthonormal returns an m×k matrix with orthonormal columns whose
// coherence μ = (m/k)·max_i ‖U_{i,:}‖² is at most maxCoherence, and that μ:
// the output layer of the sparse-noise setting of Bakshi et al. §8 (U*
// orthonormal and μ-incoherent). The columns span a Haar-random subspace
// (the orthonormal basis of an m×k standard Gaussian matrix, drawn
// row-major); such a subspace has μ = O(log m) with high probability, and it
// is redrawn (up to 100 times) while μ > maxCoherence. maxCoherence ≤ 0
// means no limit; μ ≥ 1 always.
func IncoherentOrthonormal(m, k int, maxCoherence float64, rng *rand.Rand) (*mat.Dense, float64, error) {
	if k < 1 || m < k {
		return nil, 0, fmt.Errorf("%w: need 1 ≤ k ≤ m for orthonormal columns, got m = %d, k = %d", ErrConfig, m, k)
	}
	if rng == nil {
		return nil, 0, fmt.Errorf("%w: nil random source", ErrConfig)
	}
	for try := 0; try < 100; try++ {
		g := mat.NewDense(m, k, nil)
		for i := range g.RawMatrix().Data {
			g.RawMatrix().Data[i] = rng.NormFloat64()
		}
		u, err := linalg.Orth(g)
		if err != nil || u == nil {
			continue
		}
		if _, c := u.Dims(); c != k {
			continue
		}
		mu := Coherence(u)
		if maxCoherence <= 0 || mu <= maxCoherence {
			return u, mu, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: no m = %d, k = %d orthonormal basis with coherence ≤ %v in 100 draws (the minimum possible is 1; Haar draws give O(log m))", ErrConfig, m, k, maxCoherence)
}

// Coherence returns μ(U) = (m/k)·max_i ‖U_{i,:}‖² for an m×k matrix with
// orthonormal columns (Def 13 of Bakshi et al.; Candès–Recht): 1 when the
// energy is spread evenly over the rows, m/k when a row carries a whole
// column.
func Coherence(u *mat.Dense) float64 {
	m, k := u.Dims()
	best := 0.0
	for i := 0; i < m; i++ {
		r := u.RawRowView(i)
		s := 0.0
		for _, v := range r[:k] {
			s += v * v
		}
		best = math.Max(best, s)
	}
	return best * float64(m) / float64(k)
}

// Kinds of ArbitraryNoise.
const (
	// ArbGaussian is i.i.d. N(0, σ²): the flat-spectrum case of Thm 13.
	ArbGaussian = "gaussian"
	// ArbLaplace is i.i.d. Laplace with standard deviation σ: heavy-ish tails.
	ArbLaplace = "laplace"
	// ArbLowRank is σ·G·Hᵀ/√2 with G (n×2), H (m×2) standard Gaussian: a
	// structured (spiky spectrum) noise with entry variance σ².
	ArbLowRank = "lowrank"
)

// ArbitraryNoise returns an n×m noise matrix E drawn independently of any
// input X, for the arbitrary-noise setting of Bakshi et al. §7 (Alg 8,
// Thm 13), with entry standard deviation sigma. Kinds: ArbGaussian,
// ArbLaplace, ArbLowRank. Stream: row-major draws (Gaussian: n·m
// NormFloat64; Laplace: n·m ExpFloat64 and n·m sign Float64 interleaved;
// low rank: G row-major then H row-major).
func ArbitraryNoise(n, m int, kind string, sigma float64, rng *rand.Rand) (*mat.Dense, error) {
	if n < 1 || m < 1 {
		return nil, fmt.Errorf("%w: noise of size %d×%d", ErrConfig, n, m)
	}
	if !(sigma >= 0) || math.IsInf(sigma, 0) {
		return nil, fmt.Errorf("%w: noise σ = %v must be finite and ≥ 0", ErrConfig, sigma)
	}
	if rng == nil {
		return nil, fmt.Errorf("%w: nil random source", ErrConfig)
	}
	e := mat.NewDense(n, m, nil)
	d := e.RawMatrix().Data
	switch kind {
	case ArbGaussian:
		for i := range d {
			d[i] = sigma * rng.NormFloat64()
		}
	case ArbLaplace:
		// Laplace(b) has variance 2b², so b = σ/√2.
		b := sigma / math.Sqrt2
		for i := range d {
			v := b * rng.ExpFloat64()
			if rng.Float64() < 0.5 {
				v = -v
			}
			d[i] = v
		}
	case ArbLowRank:
		g := make([]float64, 2*n)
		h := make([]float64, 2*m)
		for i := range g {
			g[i] = rng.NormFloat64()
		}
		for i := range h {
			h[i] = rng.NormFloat64()
		}
		f := sigma / math.Sqrt2
		for i := 0; i < n; i++ {
			for j := 0; j < m; j++ {
				d[i*m+j] = f * (g[2*i]*h[2*j] + g[2*i+1]*h[2*j+1])
			}
		}
	default:
		return nil, fmt.Errorf("%w: unknown noise kind %q (want %q, %q or %q)", ErrConfig, kind, ArbGaussian, ArbLaplace, ArbLowRank)
	}
	return e, nil
}
