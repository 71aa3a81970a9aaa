package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// OrthonormalRows returns a k×d matrix with orthonormal rows, Haar-distributed:
// the first k rows of linalg.RandomOrthogonal(d, rng). It is the hidden layer
// V* of the ICA setting (Bakshi et al. §4.1, Alg 3), where V*·x is again
// N(0, I_k) for x ~ N(0, I_d). Draws d² Gaussians from rng.
func OrthonormalRows(k, d int, rng *rand.Rand) (*mat.Dense, error) {
	if k < 1 || d < k {
		return nil, fmt.Errorf("synth.OrthonormalRows: %w: k = %d, d = %d; want 1 ≤ k ≤ d", ErrConfig, k, d)
	}
	if rng == nil {
		return nil, fmt.Errorf("synth.OrthonormalRows: %w: rng is nil", ErrConfig)
	}
	q := linalg.RandomOrthogonal(d, rng)
	return mat.DenseCopyOf(q.Slice(0, k, 0, d)), nil
}

// PlanarOutputWeights returns the 2×k output layer U* whose column i is
// norms[i]·(cos θ_i, sin θ_i) with θ_i = angles[i] (radians). norms nil means
// all 1. It builds the rank-deficient U* of the FPT setting ([BJW19, §6,
// Alg 7]): with m = 2 any k > 2 columns are linearly
// dependent, and Alg 7 needs only that no two are positive multiples of each
// other (distinct angles modulo 2π; θ and θ+π, i.e. u and −u, are allowed).
func PlanarOutputWeights(angles, norms []float64) (*mat.Dense, error) {
	k := len(angles)
	if k == 0 {
		return nil, fmt.Errorf("synth.PlanarOutputWeights: %w: no angles", ErrConfig)
	}
	if norms != nil && len(norms) != k {
		return nil, fmt.Errorf("synth.PlanarOutputWeights: %w: %d norms for %d angles", ErrShape, len(norms), k)
	}
	u := mat.NewDense(2, k, nil)
	for i, a := range angles {
		r := 1.0
		if norms != nil {
			r = norms[i]
		}
		if math.IsNaN(a) || math.IsInf(a, 0) || math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("synth.PlanarOutputWeights: %w: column %d has angle %v, norm %v", ErrNotFinite, i, a, r)
		}
		if r <= 0 {
			return nil, fmt.Errorf("synth.PlanarOutputWeights: %w: column %d has norm %v; want > 0 (a zero column is a dead unit)", ErrConfig, i, r)
		}
		u.Set(0, i, r*math.Cos(a))
		u.Set(1, i, r*math.Sin(a))
	}
	return u, nil
}

// OrthonormalTeacher returns the teacher nn.NewTwoLayer(V*, U) with the given
// output layer U (m×k, not modified) and V* = OrthonormalRows(k, d, rng):
// the instance of both the ICA route (U of full column rank) and the FPT
// route (any U without two positively collinear columns). Draws d²
// Gaussians from rng.
func OrthonormalTeacher(d int, U *mat.Dense, rng *rand.Rand) (*nn.MLP, error) {
	if U == nil {
		return nil, fmt.Errorf("synth.OrthonormalTeacher: %w: U is nil", ErrShape)
	}
	_, k := U.Dims()
	for _, v := range U.RawMatrix().Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("synth.OrthonormalTeacher: %w: U has %v", ErrNotFinite, v)
		}
	}
	v, err := OrthonormalRows(k, d, rng)
	if err != nil {
		return nil, fmt.Errorf("synth.OrthonormalTeacher: %w", err)
	}
	return nn.NewTwoLayer(v, mat.DenseCopyOf(U)), nil
}
