package robust

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

func codeErr(c []float64, truth mat.Vector) float64 {
	s := 0.0
	for j := range c {
		s += (c[j] - truth.AtVec(j)) * (c[j] - truth.AtVec(j))
	}
	return math.Sqrt(s)
}

// The known-bias variant (not in [MR18]) recovers c* itself, exactly without
// dense noise, at the dense-noise level with it; the linear estimator (47)
// only reaches μ·c* up to its O(√(k/d)) error.
func TestRecoverKnownBias(t *testing.T) {
	for _, delta := range []float64{0, 0.1} {
		for seed := uint64(1); seed <= 3; seed++ {
			in, err := synth.RobustData(synth.RobustConfig{D: 2000, K: 10, N: 1, S: 100, Magnitude: 50, Delta: delta}, rand.New(rand.NewPCG(seed, 11)))
			if err != nil {
				t.Fatal(err)
			}
			v := in.V.RawRowView(0)
			res, err := RecoverKnownBias(in.A, v, in.B, KnownBiasOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e := codeErr(res.C, in.C.RowView(0))
			t.Logf("δ=%g seed %d: ‖ĉ − c*‖ = %.2e, %d iterations, converged %v, gradient %.1e, %d outliers", delta, seed, e, res.Iterations, res.Converged, res.Gradient, res.Outliers)
			limit := 1e-10
			if delta > 0 {
				limit = 0.02 // δ·√(k/d) ≈ 0.007
			}
			if e > limit || !res.Converged || res.Gradient > 1e-12 {
				t.Errorf("δ=%g seed %d: error %.2e > %.0e (converged %v, gradient %.1e)", delta, seed, e, limit, res.Converged, res.Gradient)
			}
		}
	}
	if _, err := RecoverKnownBias(mat.NewDense(5, 2, []float64{1, 0, 0, 1, 1, 1, 1, 2, 2, 1}), []float64{0, 0, 0, 0, 1}, make([]float64, 5), KnownBiasOptions{}); err == nil {
		t.Error("one positive coordinate for k = 2: want an error")
	}
	if _, err := RecoverKnownBias(mat.NewDense(5, 2, nil), make([]float64, 4), make([]float64, 5), KnownBiasOptions{}); err == nil {
		t.Error("length mismatch: want an error")
	}
}

// TORRENT (a baseline [MR18] cites) decodes a linear model with sparse outliers
// exactly when β exceeds the outlier fraction, and fails when it does not.
func TestTorrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	d, k := 500, 8
	A := mat.NewDense(d, k, nil)
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	c := make([]float64, k)
	for j := range c {
		c[j] = rng.NormFloat64()
	}
	v := make([]float64, d)
	mat.NewVecDense(d, v).MulVec(A, mat.NewVecDense(k, c))
	for _, i := range rng.Perm(d)[:50] {
		v[i] += 30 * (2*rng.Float64() - 1)
	}
	s, err := NewSolver(A, Options{Linear: true})
	if err != nil {
		t.Fatal(err)
	}
	got, out, rounds, err := s.Torrent(v, 0.15, 0)
	if err != nil {
		t.Fatal(err)
	}
	diff := 0.0
	for j := range c {
		diff = math.Max(diff, math.Abs(got[j]-c[j]))
	}
	t.Logf("β = 0.15: error %.1e after %d rounds, %d rows dropped", diff, rounds, len(out))
	if diff > 1e-10 {
		t.Errorf("TORRENT with β = 0.15 > 10%% outliers: error %.1e", diff)
	}
	if _, _, _, err := s.Torrent(v, 0, 0); err == nil {
		t.Error("β = 0: want an error")
	}
}
