package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// TwoLayerConfig describes a random bias-free two-layer ReLU teacher
// Y = ReLU(X·V*ᵀ)·U*ᵀ (the instances of [BJW19]'s guarantees).
type TwoLayerConfig struct {
	// D is the input dimension d (columns of X and of V*); ≥ 1.
	D int
	// K is the number of hidden units k (rows of V*); 1 ≤ K ≤ D, because
	// the learners need V* of full row rank.
	K int
	// M is the output dimension m (rows of U*); ≥ 1. M < K is allowed (U*
	// then has rank M < K, the setting of the FPT route, Alg 7).
	M int
	// CondV is the target condition number κ(V*) = σ_max/σ_min of V* after
	// its rows are normalised to unit length, reached to within 1%. 0 (the
	// default) draws V* with i.i.d. Gaussian entries and normalises the rows,
	// without controlling κ; 1 gives orthonormal rows (the ICA setting,
	// Alg 3). Otherwise it must be ≥ 1, and K ≥ 2 (one unit row has κ = 1).
	CondV float64
	// CondU is the condition number κ(U*) over its min(M, K) singular values.
	// 0 (the default) draws U* with i.i.d. N(0, 1/K) entries. Otherwise
	// U* = Q1·diag(s)·Q2 with Haar-random orthonormal factors and s
	// log-spaced so that κ(U*) is exactly CondU, scaled so ‖U*‖_F² = M (the
	// Gaussian default's expected size); min(M, K) ≥ 2 unless CondU = 1.
	CondU float64
}

// TwoLayerTeacher draws a teacher network nn.NewTwoLayer(V*, U*) with V*
// K×D of unit rows and U* M×K, as cfg describes.
//
// With CondV > 0, V* = rownormalise(Q1·diag(s)·Q2[:K, :]) with Q1 (K×K) and
// Q2 (D×D) from linalg.RandomOrthogonal and s_i = c^{i/(K−1)}. Row
// normalisation changes the condition number (it usually lowers it), so the
// spread c is found by bisection on log c until κ(V*) is within 0.1% of
// CondV; a recipe of log-spacing s to the target directly would
// miss it.
//
// Draw order from rng: V* first (Q1 then Q2, or the K·D Gaussian entries row
// by row), then U* (its Q1 (M×M) then Q2 (K×K), or its M·K Gaussian entries
// row by row).
func TwoLayerTeacher(cfg TwoLayerConfig, rng *rand.Rand) (*nn.MLP, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("synth.TwoLayerTeacher: %w", err)
	}
	if rng == nil {
		return nil, fmt.Errorf("synth.TwoLayerTeacher: %w: rng is nil", ErrConfig)
	}
	v, err := teacherV(cfg.K, cfg.D, cfg.CondV, rng)
	if err != nil {
		return nil, fmt.Errorf("synth.TwoLayerTeacher: %w", err)
	}
	u := teacherU(cfg.M, cfg.K, cfg.CondU, rng)
	return nn.NewTwoLayer(v, u), nil
}

func (cfg TwoLayerConfig) validate() error {
	if cfg.D < 1 || cfg.K < 1 || cfg.M < 1 {
		return fmt.Errorf("%w: D = %d, K = %d, M = %d, all must be ≥ 1", ErrConfig, cfg.D, cfg.K, cfg.M)
	}
	if cfg.K > cfg.D {
		return fmt.Errorf("%w: K = %d hidden units exceed D = %d inputs; V* would not have full row rank", ErrConfig, cfg.K, cfg.D)
	}
	for _, c := range []struct {
		name string
		val  float64
		p    int
	}{{"CondV", cfg.CondV, cfg.K}, {"CondU", cfg.CondU, min(cfg.M, cfg.K)}} {
		switch {
		case c.val == 0:
		case math.IsNaN(c.val) || math.IsInf(c.val, 0) || c.val < 1:
			return fmt.Errorf("%w: %s = %v; a condition number must be finite and ≥ 1 (0 for the Gaussian default)", ErrConfig, c.name, c.val)
		case c.p == 1 && c.val != 1:
			return fmt.Errorf("%w: %s = %v but the matrix has a single non-zero singular value, so its κ is 1", ErrConfig, c.name, c.val)
		}
	}
	return nil
}

// teacherV draws V* (k×d, unit rows).
func teacherV(k, d int, cond float64, rng *rand.Rand) (*mat.Dense, error) {
	if cond == 0 {
		v := mat.NewDense(k, d, nil)
		for {
			data := v.RawMatrix().Data
			for i := range data {
				data[i] = rng.NormFloat64()
			}
			if normaliseRows(v) {
				return v, nil
			}
			// A zero row has probability 0; redraw rather than divide by it.
		}
	}
	q1 := linalg.RandomOrthogonal(k, rng)
	q2 := linalg.RandomOrthogonal(d, rng).Slice(0, k, 0, d)
	build := func(t float64) (*mat.Dense, float64) {
		var qs, w mat.Dense
		qs.Mul(q1, mat.NewDiagDense(k, logSpaced(k, math.Exp(t))))
		w.Mul(&qs, q2)
		normaliseRows(&w)
		return &w, linalg.Cond(&w)
	}
	const rtol = 1e-3
	v, kappa := build(0)
	if cond == 1 || math.Abs(kappa/cond-1) <= rtol {
		return v, nil
	}
	// κ(t) is continuous with κ(0) = 1 and κ → ∞ as t → ∞ (all normalised
	// rows tend to ±q2_k), so a bracket exists; bisection needs no
	// monotonicity to converge to a crossing.
	lo, hi := 0.0, math.Log(cond)+1
	for {
		v, kappa = build(hi)
		if kappa >= cond {
			break
		}
		lo = hi
		hi *= 2
		if hi > 700 { // e^700 is near the float64 range
			return nil, fmt.Errorf("%w: could not reach κ(V*) = %g (got %g at spread e^%.0f)", ErrConfig, cond, kappa, lo)
		}
	}
	for it := 0; it < 200; it++ {
		if math.Abs(kappa/cond-1) <= rtol {
			return v, nil
		}
		mid := 0.5 * (lo + hi)
		v, kappa = build(mid)
		if kappa < cond {
			lo = mid
		} else {
			hi = mid
		}
	}
	if math.Abs(kappa/cond-1) <= 0.01 {
		return v, nil
	}
	return nil, fmt.Errorf("%w: bisection for κ(V*) = %g stalled at %g", ErrConfig, cond, kappa)
}

// teacherU draws U* (m×k).
func teacherU(m, k int, cond float64, rng *rand.Rand) *mat.Dense {
	u := mat.NewDense(m, k, nil)
	if cond == 0 {
		data := u.RawMatrix().Data
		sc := 1 / math.Sqrt(float64(k))
		for i := range data {
			data[i] = rng.NormFloat64() * sc
		}
		return u
	}
	p := min(m, k)
	q1 := linalg.RandomOrthogonal(m, rng).Slice(0, m, 0, p)
	q2 := linalg.RandomOrthogonal(k, rng).Slice(0, p, 0, k)
	s := logSpaced(p, cond)
	ss := 0.0
	for _, x := range s {
		ss += x * x
	}
	f := math.Sqrt(float64(m) / ss)
	for i := range s {
		s[i] *= f
	}
	var qs mat.Dense
	qs.Mul(q1, mat.NewDiagDense(p, s))
	u.Mul(&qs, q2)
	return u
}

// normaliseRows scales every row of m to unit norm in place; false if a row
// is zero.
func normaliseRows(m *mat.Dense) bool {
	r, _ := m.Dims()
	for i := 0; i < r; i++ {
		row := m.RawRowView(i)
		n := 0.0
		for _, x := range row {
			n = math.Hypot(n, x)
		}
		if n == 0 {
			return false
		}
		for j := range row {
			row[j] /= n
		}
	}
	return true
}
