package synth

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestCorruptSparse(t *testing.T) {
	rng := NewRand(1)
	y := mat.NewDense(400, 50, nil)
	for i := range y.RawMatrix().Data {
		y.RawMatrix().Data[i] = rng.NormFloat64()
	}
	c, mask, err := CorruptSparse(y, SparseCorruption{Frac: 0.05}, NewRand(2))
	if err != nil {
		t.Fatal(err)
	}
	cnt := 0
	for i, v := range c.RawMatrix().Data {
		diff := math.Abs(v - y.RawMatrix().Data[i])
		if mask[i] {
			cnt++
			// rms(y) ≈ 1: corruptions are in [5, 10]·rms.
			if diff < 4 || diff > 11 {
				t.Fatalf("corruption %d has size %.2f, want in [5, 10]·rms", i, diff)
			}
		} else if diff != 0 {
			t.Fatalf("entry %d changed but is not flagged", i)
		}
	}
	if cnt != 1000 {
		t.Errorf("corrupted %d entries, want round(0.05·20000) = 1000", cnt)
	}
	// Positions are uniform: each column gets ≈ 20 ± 4.4 (binomial), the
	// max over 50 columns stays well below 40.
	for j := 0; j < 50; j++ {
		k := 0
		for i := 0; i < 400; i++ {
			if mask[i*50+j] {
				k++
			}
		}
		if k > 40 || k < 4 {
			t.Errorf("column %d has %d corruptions, want ≈ 20", j, k)
		}
	}
	c2, _, _ := CorruptSparse(y, SparseCorruption{Frac: 0.05}, NewRand(2))
	if !mat.Equal(c, c2) {
		t.Error("same seed gave different corruptions")
	}
	for _, bad := range []SparseCorruption{{Frac: -0.1}, {Frac: 1}, {Frac: 0.1, Min: 3, Max: 1}, {Frac: math.NaN()}} {
		if _, _, err := CorruptSparse(y, bad, NewRand(1)); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", bad, err)
		}
	}
}

func TestIncoherentOrthonormal(t *testing.T) {
	u, mu, err := IncoherentOrthonormal(200, 3, 4, NewRand(3))
	if err != nil {
		t.Fatal(err)
	}
	var g mat.Dense
	g.Mul(u.T(), u)
	if !mat.EqualApprox(&g, eye(3), 1e-12) {
		t.Errorf("UᵀU = %v, want I", mat.Formatted(&g))
	}
	if mu < 1 || mu > 4 || math.Abs(mu-Coherence(u)) > 0 {
		t.Errorf("coherence %v, want in [1, 4] and equal to Coherence(U)", mu)
	}
	// A coordinate basis is maximally coherent.
	e := mat.NewDense(10, 2, []float64{1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	if c := Coherence(e); c != 5 {
		t.Errorf("coherence of coordinate vectors = %v, want m/k = 5", c)
	}
	if _, _, err := IncoherentOrthonormal(3, 4, 0, NewRand(1)); !errors.Is(err, ErrConfig) {
		t.Errorf("k > m: err = %v", err)
	}
	if _, _, err := IncoherentOrthonormal(50, 3, 0.5, NewRand(1)); !errors.Is(err, ErrConfig) {
		t.Errorf("μ < 1 requested: err = %v", err)
	}
}

func eye(k int) *mat.Dense {
	e := mat.NewDense(k, k, nil)
	for i := 0; i < k; i++ {
		e.Set(i, i, 1)
	}
	return e
}

func TestArbitraryNoise(t *testing.T) {
	for _, kind := range []string{ArbGaussian, ArbLaplace, ArbLowRank} {
		e, err := ArbitraryNoise(2000, 100, kind, 0.5, NewRand(4))
		if err != nil {
			t.Fatal(err)
		}
		v := 0.0
		for _, x := range e.RawMatrix().Data {
			v += x * x
		}
		sd := math.Sqrt(v / 200000)
		// Low rank: the entry variance is random (a sum of 2 products over
		// one draw of G, H), so its tolerance is wider.
		tol := 0.02
		if kind == ArbLowRank {
			tol = 0.25
		}
		if math.Abs(sd-0.5) > tol {
			t.Errorf("%s: entry sd %.3f, want 0.5 ± %.2f", kind, sd, tol)
		}
	}
	if _, err := ArbitraryNoise(10, 10, "cauchy", 1, NewRand(1)); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown kind: err = %v", err)
	}
	if _, err := ArbitraryNoise(10, 10, ArbGaussian, -1, NewRand(1)); !errors.Is(err, ErrConfig) {
		t.Errorf("negative σ: err = %v", err)
	}
}
