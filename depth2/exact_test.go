package depth2

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/nn"
)

// randomNet draws m unit rows in R^d, biases b and output weights with
// |a| ∈ [0.5, 2] and random signs (one output).
func randomNet(d, m int, b []float64, rng *rand.Rand) *nn.Depth2 {
	W := mat.NewDense(m, d, nil)
	for i := 0; i < m; i++ {
		row := W.RawRowView(i)
		for j := range row {
			row[j] = rng.NormFloat64()
		}
		vec.Normalize(row)
	}
	A := mat.NewDense(1, m, nil)
	for i := 0; i < m; i++ {
		a := 0.5 + 1.5*rng.Float64()
		if rng.IntN(2) == 0 {
			a = -a
		}
		A.Set(0, i, a)
	}
	return &nn.Depth2{W: W, B: append([]float64(nil), b...), A: A}
}

// unitError matches recovered units to the truth (by |cos| when flips are
// allowed, else by cos) greedily and returns the largest error over
// ‖w − ŵ‖, |b − b̂|, ‖a − â‖ after aligning the sign when allowed.
func unitError(t *testing.T, truth *nn.Depth2, units []Unit, allowFlip bool) float64 {
	t.Helper()
	m := truth.Hidden()
	if len(units) != m {
		t.Fatalf("recovered %d units, truth has %d", len(units), m)
	}
	used := make([]bool, m)
	worst := 0.0
	for i := 0; i < m; i++ {
		w := truth.W.RawRowView(i)
		best, bestCos := -1, -2.0
		for j, u := range units {
			if used[j] {
				continue
			}
			c := vec.Dot(w, u.W)
			if allowFlip {
				c = math.Abs(c)
			}
			if c > bestCos {
				best, bestCos = j, c
			}
		}
		used[best] = true
		u := units[best]
		xi := 1.0
		if allowFlip && vec.Dot(w, u.W) < 0 {
			xi = -1
		}
		e := 0.0
		for j := range w {
			e = math.Max(e, math.Abs(xi*u.W[j]-w[j]))
		}
		e = math.Max(e, math.Abs(xi*u.B-truth.B[i]))
		for tt := range u.A {
			e = math.Max(e, math.Abs(u.A[tt]-truth.A.At(tt, i)))
		}
		worst = math.Max(worst, e)
	}
	return worst
}

// [ATV21, Theorem 4.2] with ℓ = 1: d = 6, m = 4 with one b_i = 0 (invisible
// in f_3, supplied by f_4): every parameter, signs included, to ≤ 1e-10 from
// exact population moments.
func TestExactFullRank(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		net := randomNet(6, 4, []float64{0, 0.7, -0.9, 0.35}, rng)
		mo, err := PopulationMoments(net, 4)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := RecoverExact(mo, 1, seed)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Ranks[0] != 3 || rec.Ranks[1] != 4 {
			t.Errorf("seed %d: ranks k′=%d k″=%d, want 3 and 4 (Claim 4.4: the b=0 unit vanishes from f_3)", seed, rec.Ranks[0], rec.Ranks[1])
		}
		if !rec.SignsFixed {
			t.Fatalf("seed %d: signs not fixed: %v", seed, rec.Warnings)
		}
		if e := unitError(t, net, rec.Units, false); e > 1e-10 {
			t.Errorf("seed %d: max parameter error %.2e > 1e-10", seed, e)
		} else {
			t.Logf("seed %d: max parameter error %.2e", seed, e)
		}
	}
}

// [ATV21, Theorem 4.2] with ℓ = 2, overcomplete: d = 4, m = 7 > d, one unit
// at the root √3 of He_3 (absent from f_5) and one at a root of He_4
// (absent from f_6): every (a_i, ξ_i·b_i, ξ_i·w_i) to ≤ 1e-10, and the
// flattenings of f_5 and f_6 have rank 6 each, one per unit present.
func TestExactOvercomplete(t *testing.T) {
	he4root := math.Sqrt(3 - math.Sqrt(6)) // He_4 = z⁴ − 6z² + 3
	if math.Abs(hermite.He(4, he4root)) > 1e-12 {
		t.Fatal("root")
	}
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		net := randomNet(4, 7, []float64{math.Sqrt(3), he4root, 0.3, -0.6, 1.1, -1.4, 0.05}, rng)
		mo, err := PopulationMoments(net, 6)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := RecoverExact(mo, 2, seed)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Ranks[0] != 6 || rec.Ranks[1] != 6 {
			t.Errorf("seed %d: ranks %v, want 6 and 6 (one per unit present)", seed, rec.Ranks)
		}
		if e := unitError(t, net, rec.Units, true); e > 1e-10 {
			t.Errorf("seed %d: max parameter error up to sign %.2e > 1e-10", seed, e)
		} else {
			t.Logf("seed %d: max parameter error %.2e", seed, e)
		}
	}
}
