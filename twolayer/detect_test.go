package twolayer

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestCheckGaussian(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	gen := func(n, d int, draw func() float64) *mat.Dense {
		X := mat.NewDense(n, d, nil)
		for i := range X.RawMatrix().Data {
			X.RawMatrix().Data[i] = draw()
		}
		return X
	}
	// A correlated Gaussian must pass on every seed (whitening handles Σ ≠ I).
	for seed := uint64(0); seed < 10; seed++ {
		X := gen(20000, 10, rng.NormFloat64)
		mix := mat.NewDense(10, 10, nil)
		for i := range mix.RawMatrix().Data {
			mix.RawMatrix().Data[i] = rng.NormFloat64()
		}
		var Xc mat.Dense
		Xc.Mul(X, mix)
		chk, err := CheckGaussian(&Xc, seed)
		if err != nil {
			t.Fatal(err)
		}
		if !chk.Gaussian {
			t.Errorf("seed %d: Gaussian input flagged: %s", seed, chk.Worst)
		}
	}
	for name, draw := range map[string]func() float64{
		"uniform cube": func() float64 { return 2*rng.Float64() - 1 },
		"Laplace":      func() float64 { return rng.ExpFloat64() * float64(1-2*rng.IntN(2)) },
		"shifted":      func() float64 { return rng.NormFloat64() + 0.2 },
	} {
		chk, err := CheckGaussian(gen(2000, 4, draw), 1)
		if err != nil {
			t.Fatal(err)
		}
		if chk.Gaussian {
			t.Errorf("%s input passed as Gaussian (max z %.1f)", name, chk.MaxZ)
		}
	}
}

func TestCheckResidual(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	n, m, k := 4000, 60, 3
	lowRank := func() *mat.Dense {
		A, B := mat.NewDense(n, k, nil), mat.NewDense(k, m, nil)
		for _, M := range []*mat.Dense{A, B} {
			for i := range M.RawMatrix().Data {
				M.RawMatrix().Data[i] = math.Max(rng.NormFloat64(), 0)
			}
		}
		var Y mat.Dense
		Y.Mul(A, B)
		return &Y
	}
	Y := lowRank()
	noisy := mat.DenseCopyOf(Y)
	for i := range noisy.RawMatrix().Data {
		noisy.RawMatrix().Data[i] += 0.1 * rng.NormFloat64()
	}
	chk, err := CheckResidual(noisy, k)
	if err != nil {
		t.Fatal(err)
	}
	if chk.Sparse {
		t.Errorf("Gaussian noise flagged as sparse corruption: %+v", chk)
	}
	sparse := mat.DenseCopyOf(Y)
	for i := range sparse.RawMatrix().Data {
		if rng.Float64() < 0.05 {
			sparse.RawMatrix().Data[i] += 20 * (2*rng.Float64() - 1)
		}
	}
	chk, err = CheckResidual(sparse, k)
	if err != nil {
		t.Fatal(err)
	}
	if !chk.Sparse {
		t.Errorf("5%% large corruptions not flagged as sparse: %+v", chk)
	}
}
