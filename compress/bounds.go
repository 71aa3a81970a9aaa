package compress

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/linalg"
)

// The theorems' bounds as numbers ([ZS25, Theorems 3.1, 4.4 and 4.9,
// Corollary 4.7]), so that users can see what they promise at their sizes. Notation as in the paper: d1 calibration rows,
// d inputs, d2 outputs, r rank. The probabilistic bounds of Theorems 4.4 and
// 4.9 carry an absolute constant C ≥ 4√2·e that the proofs use; with it they
// are vacuous at laboratory sizes, which these functions make visible
// rather than hide.

// ConstC is the absolute constant C = 4√2·e ≈ 15.377 used in the proofs of
// Theorems 4.4 and 4.9.
var ConstC = 4 * math.Sqrt2 * math.E

// Thm31Bound returns the explicit Gaussian form of Theorem 3.1: with
// probability at least 1 − e^{−t²/2},
// ‖X̌(M − M̂)‖_F² ≤ 8r(σ(√d + √d2 + t) + √(ε·d1))², for noise G with i.i.d.
// N(0, σ²) entries and a misfit ‖E‖_op² ≤ ε·d1. It returns that squared
// Frobenius bound and the same divided by d1·d2 (an MSE).
func Thm31Bound(r, d, d2, d1 int, sigma, eps, t float64) (frobSq, mse float64) {
	a := sigma*(math.Sqrt(float64(d))+math.Sqrt(float64(d2))+t) + math.Sqrt(eps*float64(d1))
	frobSq = 8 * float64(r) * a * a
	return frobSq, frobSq / (float64(d1) * float64(d2))
}

// Thm31Rate is the rate of Theorem 3.1 without its constant,
// r·(d + d2)/(d1·d2)·σ² (+ ε): the MSE the theorem predicts up to an
// absolute factor, ≈ the degrees of freedom r(d + d2 − r) over the d1·d2
// observed entries.
func Thm31Rate(r, d, d2, d1 int, sigma, eps float64) float64 {
	return float64(r)*float64(d+d2)/(float64(d1)*float64(d2))*sigma*sigma + eps
}

// Thm31Core returns the deterministic core of Theorem 3.1 (checked by
// TestDeterministicInequality):
// 2√(2r)·‖P_X̌(Ỹ − X̌M)‖_op, a bound on ‖X̌(M − M̂)‖_F valid for every
// rank-≤r M when X̌ has full column rank.
// xc (X̌) must be d1×d, m (M) d×d2 and yt (Ỹ) d1×d2, all finite, and r ≥ 0;
// otherwise the error wraps ErrInput and says what was expected.
func Thm31Core(r int, xc, yt, m *mat.Dense) (float64, error) {
	const fn = "compress.Thm31Core"
	if r < 0 {
		return 0, errs.Inputf("%s: rank r = %d; expected r ≥ 0", fn, r)
	}
	d1, d, err := certify.CheckMatrix(fn, "xc", xc, -1, -1, "d1×d (X̌, one row per sample)")
	if err != nil {
		return 0, err
	}
	_, d2, err := certify.CheckMatrix(fn, "m", m, d, -1, fmt.Sprintf("d×d2 with d = %d (xc's columns)", d))
	if err != nil {
		return 0, err
	}
	if _, _, err := certify.CheckMatrix(fn, "yt", yt, d1, d2, fmt.Sprintf("d1×d2 with d1 = %d (xc's rows) and d2 = %d (m's columns)", d1, d2)); err != nil {
		return 0, err
	}
	var res mat.Dense
	res.Mul(xc, m)
	res.Sub(yt, &res)
	sub, err := NewSubspace(xc)
	if err != nil {
		return 0, err
	}
	p := sub.Project(&res)
	_, s, _, err := linalg.ThinSVD(p)
	if err != nil {
		return 0, err
	}
	return 2 * math.Sqrt(2*float64(r)) * s[0], nil
}

// Thm44Bound returns Theorem 4.4's explicit bound on the MSE
// ‖X̌M − X̌M̂‖_F²/(d1·d2) for Alg 4: 2·C·α·(4α + 2β)·√(r(d1 + d2)/(d1·d2)),
// for targets with ‖X̌M‖_∞ ≤ α and bounded noise ‖G‖_∞ ≤ β.
func Thm44Bound(alpha, beta float64, r, d1, d2 int) float64 {
	return 2 * ConstC * alpha * (4*alpha + 2*beta) * math.Sqrt(float64(r)*float64(d1+d2)/(float64(d1)*float64(d2)))
}

// Cor47Bound returns Corollary 4.7's bound with a model misfit
// ‖XW − (X̌M + G)‖_F² ≤ ε·d1·d2: 2·Thm44Bound + 2ε (the factor 2 from
// (a + b)² ≤ 2a² + 2b² in its proof).
func Cor47Bound(alpha, beta float64, r, d1, d2 int, eps float64) float64 {
	return 2*Thm44Bound(alpha, beta, r, d1, d2) + 2*eps
}

// Thm49Bound returns Theorem 4.9's bound (4) on the MSE of Alg 5:
// C_{α,σ}·max{2√log(d1·d2), 8}·√(r(d1 + d2)/(d1·d2)) with
// C_{α,σ} = 16·C·α·β_{α,σ}·γ_{α,σ}, β = πσ²e^{α²/(2σ²)}, γ = (α + σ)/σ².
func Thm49Bound(alpha, sigma float64, r, d1, d2 int) float64 {
	beta := math.Pi * sigma * sigma * math.Exp(alpha*alpha/(2*sigma*sigma))
	gamma := (alpha + sigma) / (sigma * sigma)
	c := 16 * ConstC * alpha * beta * gamma
	l := math.Max(2*math.Sqrt(math.Log(float64(d1)*float64(d2))), 8)
	return c * l * math.Sqrt(float64(r)*float64(d1+d2)/(float64(d1)*float64(d2)))
}

// EffRank returns r_eff(Y) = (‖Y‖_* / (‖Y‖_∞·√(d1·d2)))², the smallest r for
// which Y is "approximately rank r" in the sense of [ZS25, Definition 4.1].
// r_eff(Y) ≤ rank(Y) (Remark 4.2).
func EffRank(y mat.Matrix) float64 {
	r, c := y.Dims()
	inf := maxAbs(y)
	if inf == 0 {
		return 0
	}
	q := NuclearNorm(y) / (inf * math.Sqrt(float64(r)*float64(c)))
	return q * q
}

// The censored-Gaussian link f(x) = Φ(x/σ) and its constants (Lemmas B.1,
// B.3).

// LinkLogCurvature returns (log f)″(x) for f(x) = Φ(x/σ), which Lemma B.1
// places in [−1/σ², 0]: with t = x/σ and λ(t) = φ(t)/Φ(t),
// (log f)″ = −λ(t)(t + λ(t))/σ².
func LinkLogCurvature(x, sigma float64) float64 {
	t := x / sigma
	lam := hermite.NormHazard(-t) // φ(t)/Φ(t) = φ(−t)/(1 − Φ(−t))
	return -lam * (t + lam) / (sigma * sigma)
}

// LemmaB3 returns the constants of Lemma B.3 evaluated numerically on a fine
// grid of |x| ≤ α, L = sup |f′|/(f(1 − f)) and β = sup f(1 − f)/f′², with their
// closed-form upper bounds 8(α + σ)/σ² and πσ²e^{α²/(2σ²)} (TestLemmaB3).
func LemmaB3(alpha, sigma float64) (l, lBound, beta, betaBound float64) {
	const n = 20001
	for i := 0; i < n; i++ {
		x := -alpha + 2*alpha*float64(i)/float64(n-1)
		t := x / sigma
		f := hermite.NormCDF(t)
		fp := hermite.NormPDF(t) / sigma
		g := f * (1 - f)
		l = math.Max(l, fp/g)
		beta = math.Max(beta, g/(fp*fp))
	}
	return l, 8 * (alpha + sigma) / (sigma * sigma), beta, math.Pi * sigma * sigma * math.Exp(alpha*alpha/(2*sigma*sigma))
}

// Hellinger2 is the squared Hellinger distance between Bernoulli(p) and
// Bernoulli(q), (√p − √q)² + (√(1−p) − √(1−q))² (Lemma A.7's d_H²).
func Hellinger2(p, q float64) float64 {
	a := math.Sqrt(p) - math.Sqrt(q)
	b := math.Sqrt(1-p) - math.Sqrt(1-q)
	return a*a + b*b
}

// KLBernoulli is D_KL(Bernoulli(p) ‖ Bernoulli(q)).
func KLBernoulli(p, q float64) float64 {
	var s float64
	if p > 0 {
		s += p * math.Log(p/q)
	}
	if p < 1 {
		s += (1 - p) * math.Log((1-p)/(1-q))
	}
	return s
}

// LemmaA3Prob is Lemma A.3's bound on P(max_ij G_ij ≥ 2√(log(d1·d2))·σ) for
// i.i.d. N(0, σ²) entries: 1/(2√(2π)·d1·d2·√log(d1·d2)).
func LemmaA3Prob(d1, d2 int) float64 {
	n := float64(d1) * float64(d2)
	return 1 / (2 * math.Sqrt(2*math.Pi) * n * math.Sqrt(math.Log(n)))
}

// SurrogateGap returns −σ²·log(1 − f(x)) − ½ρ(x)², the gap of Appendix C's
// convex surrogate of ½ReLU(x)² (≥ 0, σ²·log 2 at x = 0, and ratio → 1 as
// x → ∞ by Lemma C.1).
func SurrogateGap(x, sigma float64) float64 {
	s := -sigma * sigma * hermite.LogNormCDF(-x/sigma)
	r := math.Max(x, 0)
	return s - 0.5*r*r
}

var _ = floats.Sum
