package hermite

import (
	"fmt"
	"math"
)

// ReLUBias returns c_k(b) = E_{z~N(0,1)}[ReLU(z + b)·He_k(z)], the Hermite
// coefficient of a ReLU unit with bias b ([ATV21, Lemma 3.5]):
//
//	c_0(b) = b·Φ(b) + φ(b),  c_1(b) = Φ(b),  c_k(b) = (−1)^k·He_{k−2}(b)·φ(b) for k ≥ 2.
//
// By Stein's identity E[ReLU(w·x + b)·He_k(x)] = c_k(b)·w^{⊗k} for a unit w
// and x ~ N(0, I), so the order-k Hermite moment of a depth-2 network
// Σ a_i·ReLU(w_i·x + b_i) is Σ a_i·c_k(b_i)·w_i^{⊗k}. The bias enters every
// order through one scalar; c_k(0) = ReLU{}.Coeff(k). For k ≥ 2 it is
// He_{k−2}(b)·φ(b) up to sign: exponentially small once |b| ≳ 3, which is why
// units with large biases cannot be recovered from moments ([ATV21,
// Theorem D.1], the good set G).
func ReLUBias(k int, b float64) float64 {
	switch {
	case k < 0:
		panic(fmt.Sprintf("hermite: negative order %d", k))
	case k == 0:
		return ReLUMean(b)
	case k == 1:
		return NormCDF(b)
	}
	c := He(k-2, b) * NormPDF(b)
	if k%2 == 1 {
		return -c
	}
	return c
}

// ReLUMean returns E[ReLU(z + b)] = b·Φ(b) + φ(b) for z ~ N(0,1), the
// order-0 coefficient c_0(b). For b < −3 the two terms cancel, so it is
// computed from a continued fraction of the Mills ratio instead, keeping full
// relative accuracy far into the tail (c_0(−30) ≈ 5.4e-200).
func ReLUMean(b float64) float64 {
	if b > -3 {
		return b*NormCDF(b) + NormPDF(b)
	}
	// With t = −b and the Mills ratio Φ(−t)/φ(t) = 1/(t + r),
	// r = 1/(t + 2/(t + 3/(t + …))) (Laplace's continued fraction),
	// b·Φ(b) + φ(b) = φ(b)·(1 − t/(t + r)) = φ(b)·r/(t + r): no cancellation.
	t := -b
	r := 0.0
	for k := 400; k >= 2; k-- {
		r = float64(k) / (t + r)
	}
	r = 1 / (t + r)
	return NormPDF(b) * r / (t + r)
}

// HeNormalized returns He_n(x)/√(n!), the orthonormal Hermite polynomial,
// by the stable recurrence h_{n+1} = (x·h_n − √n·h_{n−1})/√(n+1). It stays
// in range for orders where He_n and n! overflow separately (n ≳ 170), which
// the Parseval sums of [ATV21, Proposition B.1] need.
func HeNormalized(n int, x float64) float64 {
	if n < 0 {
		panic(fmt.Sprintf("hermite: negative order %d", n))
	}
	p0, p1 := 1.0, x
	if n == 0 {
		return p0
	}
	for k := 1; k < n; k++ {
		p0, p1 = p1, (x*p1-math.Sqrt(float64(k))*p0)/math.Sqrt(float64(k+1))
	}
	return p1
}

// LogFactorial returns log(n!).
func LogFactorial(n int) float64 {
	v, _ := math.Lgamma(float64(n) + 1)
	return v
}
