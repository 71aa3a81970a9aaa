package twolayer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/synth"
)

// lineAngleMin returns the smallest angle between the lines spanned by two
// rows of V, in (0, π/2].
func lineAngleMin(V *mat.Dense) float64 {
	k, _ := V.Dims()
	best := math.Pi / 2
	for i := 0; i < k; i++ {
		for j := i + 1; j < k; j++ {
			a, b := V.RawRowView(i), V.RawRowView(j)
			c := math.Abs(dot(a, b)) / math.Sqrt(dot(a, a)*dot(b, b))
			best = math.Min(best, math.Acos(math.Min(c, 1)))
		}
	}
	return best
}

// [BJW19, Lemma 7]: κ(V) ≥ c/θ_min. By Cauchy interlacing κ(V) ≥ κ(two rows
// at line angle θ) = cot(θ/2) ≥ (π/2)/θ on (0, π/2], so c = π/2 holds for
// every V; checked on 300 random unit-row matrices. And sweeping two rows
// toward each other makes κ grow like 1/θ: the fitted log-log slope is −1 and
// κ·θ → 2.
func TestKappaVsMinAngle(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	worst := math.Inf(1)
	for trial := 0; trial < 300; trial++ {
		k, d := 2+rng.IntN(5), 7
		V := mat.NewDense(k, d, nil)
		for i := range V.RawMatrix().Data {
			V.RawMatrix().Data[i] = rng.NormFloat64()
		}
		normalizeRows(V)
		worst = math.Min(worst, linalg.Cond(V)*lineAngleMin(V))
	}
	if worst < math.Pi/2*(1-1e-9) {
		t.Errorf("min κ(V)·θ_min over random V = %.4f < π/2", worst)
	}
	t.Logf("min κ·θ_min over 300 random V: %.3f (bound π/2 = 1.571)", worst)

	var lx, ly []float64
	for j := 2; j <= 14; j++ {
		theta := math.Ldexp(1, -j)
		V := mat.NewDense(5, 8, nil)
		V.Set(0, 0, 1)
		V.Set(1, 0, math.Cos(theta))
		V.Set(1, 1, math.Sin(theta))
		for i := 2; i < 5; i++ {
			V.Set(i, i, 1)
		}
		kappa := linalg.Cond(V)
		lx, ly = append(lx, math.Log(theta)), append(ly, math.Log(kappa))
		if j == 14 && math.Abs(kappa*theta-2) > 1e-3 {
			t.Errorf("θ = 2^-14: κ·θ = %.6f, want → 2", kappa*theta)
		}
	}
	if _, s := stat.LinearRegression(lx, ly, nil, false); math.Abs(s+1) > 0.01 {
		t.Errorf("log κ vs log θ slope %.4f, want −1", s)
	}
}

// [BJW19, Lemma 19]: for W = [V*; −V*] (2k rows), f(X̄·Wᵀ) (ℓ × 2k) has full
// rank 2k, σ_min/√ℓ is bounded below and stable as ℓ grows, and
// ‖f‖_F² ≤ 10·2k·ℓ. For orthonormal V* the limit is known:
// f(X̄Wᵀ)ᵀf(X̄Wᵀ)/ℓ → M with M_jj = 1/2, 0 between a unit and its negation
// (never both active) and 1/(2π) between independent units, so
// σ_min/√ℓ → √λ_min(M); checked to 5% at ℓ = 32000.
func TestLemma19ActivationRank(t *testing.T) {
	const k, d = 5, 10
	for _, condV := range []float64{1, 3} {
		rng := synth.NewRand(uint64(20 + condV))
		teacher, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: d, K: k, M: k, CondV: condV}, rng)
		if err != nil {
			t.Fatal(err)
		}
		V := teacher.Layers[0].Weight
		W := mat.NewDense(2*k, d, nil)
		for i := 0; i < k; i++ {
			W.SetRow(i, V.RawRowView(i))
			row := W.RawRowView(k + i)
			for j, v := range V.RawRowView(i) {
				row[j] = -v
			}
		}
		X, err := synth.GaussianInputs(32000, d, nil, rng)
		if err != nil {
			t.Fatal(err)
		}
		var ratios []float64
		for _, l := range []int{2000, 8000, 32000} {
			F := activations(X.Slice(0, l, 0, d).(*mat.Dense), W)
			_, s, _, err := linalg.ThinSVD(F)
			if err != nil {
				t.Fatal(err)
			}
			if r := linalg.NumericalRank(s, 1e-10); r != 2*k {
				t.Errorf("κ(V*)=%g ℓ=%d: rank %d, want %d", condV, l, r, 2*k)
			}
			ratio := s[2*k-1] / math.Sqrt(float64(l))
			ratios = append(ratios, ratio)
			if fro := mat.Norm(F, 2); fro*fro > 10*2*k*float64(l) {
				t.Errorf("κ(V*)=%g ℓ=%d: ‖F‖_F² = %.0f > 10·2k·ℓ", condV, l, fro*fro)
			}
			if ratio < 0.05/(condV*condV) {
				t.Errorf("κ(V*)=%g ℓ=%d: σ_min/√ℓ = %.4f, below c/κ² with c = 0.05", condV, l, ratio)
			}
		}
		if lo, hi := slices.Min(ratios), slices.Max(ratios); hi > 1.15*lo {
			t.Errorf("κ(V*)=%g: σ_min/√ℓ varies from %.4f to %.4f over ℓ = 2e3..3.2e4", condV, lo, hi)
		}
		t.Logf("κ(V*)=%g: σ_min/√ℓ at ℓ = 2e3, 8e3, 3.2e4: %.4f", condV, ratios)
		if condV == 1 {
			M := mat.NewSymDense(2*k, nil)
			for i := 0; i < 2*k; i++ {
				for j := i; j < 2*k; j++ {
					switch {
					case i == j:
						M.SetSym(i, j, 0.5)
					case j == i+k:
						M.SetSym(i, j, 0)
					default:
						M.SetSym(i, j, 1/(2*math.Pi))
					}
				}
			}
			var eig mat.EigenSym
			if !eig.Factorize(M, false) {
				t.Fatal("eigen failed")
			}
			want := math.Sqrt(eig.Values(nil)[0])
			if got := ratios[2]; math.Abs(got-want) > 0.05*want {
				t.Errorf("orthonormal V*: σ_min/√ℓ = %.4f, want √λ_min(M) = %.4f", got, want)
			}
		}
	}
}

// [BJW19, Lemma 6]: for a Gaussian sketch T (k×m), TU* is invertible, and
// κ(TU*) ≤ (k²m/δ)·κ(U*) with probability ≥ 1 − δ; in practice the median of
// κ(TU*)/κ(U*) is far below k²m/δ. The ICA route instead uses T = Pᵀ (top-k
// right singular vectors of Y), for which κ(PᵀU*) = κ(U*) exactly.
func TestLemma6Sketch(t *testing.T) {
	const k, m, delta, trials = 6, 10, 0.1, 400
	rng := synth.NewRand(31)
	teacher, err := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: 20, K: k, M: m, CondU: 10}, rng)
	if err != nil {
		t.Fatal(err)
	}
	U := teacher.Layers[1].Weight
	kU := linalg.Cond(U)
	bound := float64(k*k*m) / delta
	var ratios []float64
	exceed := 0
	for trial := 0; trial < trials; trial++ {
		T := mat.NewDense(k, m, nil)
		for i := range T.RawMatrix().Data {
			T.RawMatrix().Data[i] = rng.NormFloat64()
		}
		var TU mat.Dense
		TU.Mul(T, U)
		kTU := linalg.Cond(&TU)
		if math.IsInf(kTU, 0) || kTU > 1e12 {
			t.Fatalf("trial %d: TU* is singular (κ = %g)", trial, kTU)
		}
		ratios = append(ratios, kTU/kU)
		if kTU > bound*kU {
			exceed++
		}
	}
	slices.Sort(ratios)
	med := ratios[trials/2]
	t.Logf("κ(U*) = %.1f; κ(TU*)/κ(U*): median %.1f, 90th percentile %.1f, max %.1f; bound k²m/δ = %.0f", kU, med, ratios[trials*9/10], ratios[trials-1], bound)
	if frac := float64(exceed) / trials; frac > delta {
		t.Errorf("κ(TU*) exceeded (k²m/δ)κ(U*) in %.3f of trials, more than δ = %g", frac, delta)
	}
	if med > bound/20 {
		t.Errorf("median κ(TU*)/κ(U*) = %.1f, not well below k²m/δ = %.0f", med, bound)
	}
	if med < 1 {
		t.Errorf("median κ(TU*)/κ(U*) = %.2f < 1", med)
	}

	X, err := synth.GaussianInputs(5000, 20, nil, rng)
	if err != nil {
		t.Fatal(err)
	}
	Y, _, err := synth.TwoLayerData(teacher, X, synth.Noise{}, rng)
	if err != nil {
		t.Fatal(err)
	}
	_, _, P, err := linalg.TopK(Y, k)
	if err != nil {
		t.Fatal(err)
	}
	var PU mat.Dense
	PU.Mul(P.T(), U)
	if got := linalg.Cond(&PU); math.Abs(got/kU-1) > 1e-9 {
		t.Errorf("κ(PᵀU*) = %.12g, want κ(U*) = %.12g", got, kU)
	}
}
