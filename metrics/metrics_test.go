package metrics

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// forward computes ReLU(x·Vᵀ)·Uᵀ for a bias-free two-layer net.
func forward(net *nn.MLP, x *mat.Dense) *mat.Dense {
	var h, y mat.Dense
	h.Mul(x, net.Layers[0].Weight.T())
	h.Apply(func(_, _ int, v float64) float64 { return math.Max(v, 0) }, &h)
	y.Mul(&h, net.Layers[1].Weight.T())
	return &y
}

// symmetric returns (U*·D·Πᵀ, Π·D⁻¹·V*): hidden unit j of the result is unit
// sigma[j] of the input, with V's row divided by dscale[sigma[j]] and U's
// column multiplied by it ([BJW19, §1.2]).
func symmetric(v, u *mat.Dense, sigma []int, dscale []float64) (*mat.Dense, *mat.Dense) {
	k, d := v.Dims()
	m, _ := u.Dims()
	v2 := mat.NewDense(k, d, nil)
	u2 := mat.NewDense(m, k, nil)
	for j, s := range sigma {
		for c := 0; c < d; c++ {
			v2.Set(j, c, v.At(s, c)/dscale[s])
		}
		for r := 0; r < m; r++ {
			u2.Set(r, j, u.At(r, s)*dscale[s])
		}
	}
	return v2, u2
}

// The symmetries of [BJW19, §1.2]: for any permutation Π and positive
// diagonal D, (U*DΠᵀ, ΠD⁻¹V*) computes the same function and CompareTwoLayer
// reports zero error (to rounding) with the inverse permutation.
func TestCompareTwoLayerSymmetryInvariance(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 42))
		d := 1 + rng.IntN(25)
		k := 1 + rng.IntN(d)
		if seed%3 == 0 && d >= 2 {
			// Also k > d: CompareTwoLayer does not need rank, only distinct
			// directions (with d = 1 all rows are ±1 and units are not
			// identifiable).
			k = 1 + rng.IntN(40)
		}
		m := 1 + rng.IntN(12)
		v, u := testutil.RandDense(rng, k, d), testutil.RandDense(rng, m, k)
		sigma := rng.Perm(k)
		dscale := make([]float64, k)
		for i := range dscale {
			dscale[i] = math.Pow(10, -3+6*rng.Float64()) // 1e-3 … 1e3
		}
		v2, u2 := symmetric(v, u, sigma, dscale)
		truth, est := nn.NewTwoLayer(v, u), nn.NewTwoLayer(v2, u2)

		if seed < 20 { // the construction really is a symmetry
			x := testutil.RandDense(rng, 200, d)
			if r := RelResidual(forward(truth, x), forward(est, x)); r > 1e-13 {
				t.Fatalf("seed %d: outputs differ by %.3g: the test's symmetry is wrong", seed, r)
			}
		}
		e, err := CompareTwoLayer(truth, est)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if e.MaxRelErr > 1e-13 || e.RelErrU > 1e-13 || e.MaxRowErrV > 1e-13 || e.MaxColErrU > 1e-13 {
			t.Fatalf("seed %d (d=%d k=%d m=%d): error %+v, want 0", seed, d, k, m, e)
		}
		for i, j := range e.Perm {
			if sigma[j] != i {
				t.Fatalf("seed %d: Perm[%d] = %d but est unit %d is truth unit %d", seed, i, j, j, sigma[j])
			}
		}
	}
}

// A unit whose V row and U column are both negated is a different unit for
// ReLU; it must not be reported as equal.
func TestCompareTwoLayerSignFlipIsAnError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	v, u := testutil.RandDense(rng, 4, 6), testutil.RandDense(rng, 5, 4)
	v2, u2 := mat.DenseCopyOf(v), mat.DenseCopyOf(u)
	for c := 0; c < 6; c++ {
		v2.Set(2, c, -v2.At(2, c))
	}
	for r := 0; r < 5; r++ {
		u2.Set(r, 2, -u2.At(r, 2))
	}
	e, err := CompareTwoLayer(nn.NewTwoLayer(v, u), nn.NewTwoLayer(v2, u2))
	if err != nil {
		t.Fatal(err)
	}
	if e.MaxRelErr < 0.5 {
		t.Errorf("sign-flipped unit reported as matching: %+v", e)
	}
	// And the networks really differ.
	x := testutil.RandDense(rng, 500, 6)
	if r := RelResidual(forward(nn.NewTwoLayer(v, u), x), forward(nn.NewTwoLayer(v2, u2), x)); r < 1e-2 {
		t.Errorf("sign flip gives the same function (residual %.3g)?", r)
	}

	// One unit: the only candidate is the flipped row, at angle π.
	one := mat.NewDense(1, 3, []float64{1, 2, 3})
	neg := mat.NewDense(1, 3, []float64{-1, -2, -3})
	perm, err := MatchRows(one, neg)
	if err != nil {
		t.Fatal(err)
	}
	if a := MaxAngle(one, neg, perm); math.Abs(a-math.Pi) > 1e-15 {
		t.Errorf("MaxAngle(v, −v) = %v, want π", a)
	}
}

// Matching by |cos| and by cos disagree here; ReLU needs cos.
func TestMatchRowsSignedCosine(t *testing.T) {
	truth := mat.NewDense(2, 2, []float64{1, 0, 0, 1})
	est := mat.NewDense(2, 2, []float64{-1, 0, 1, 1})
	perm, err := MatchRows(truth, est)
	if err != nil {
		t.Fatal(err)
	}
	// |cos| would give [0 1] (1 + 0.707); signed cos gives [1 0] (0.707 + 0).
	if !slices.Equal(perm, []int{1, 0}) {
		t.Errorf("perm = %v, want [1 0]", perm)
	}
}

// The Hungarian matching is optimal: compare with brute force over all
// injective assignments, square and rectangular.
func TestMatchRowsOptimal(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		k := 1 + rng.IntN(6)
		ke := k + rng.IntN(3)
		d := 1 + rng.IntN(5) // small d: many near-ties and negative cosines
		truth, est := testutil.RandDense(rng, k, d), testutil.RandDense(rng, ke, d)
		perm, err := MatchRows(truth, est)
		if err != nil {
			t.Fatal(err)
		}
		tn, _ := unitRows("t", truth)
		en, _ := unitRows("e", est)
		score := func(p []int) float64 {
			s := 0.0
			for i, j := range p {
				s += mat.Dot(tn.RowView(i), en.RowView(j))
			}
			return s
		}
		seen := map[int]bool{}
		for _, j := range perm {
			if j < 0 || j >= ke || seen[j] {
				t.Fatalf("seed %d: perm %v is not injective into [0,%d)", seed, perm, ke)
			}
			seen[j] = true
		}
		best := math.Inf(-1)
		var rec func(i int, p []int, used []bool)
		rec = func(i int, p []int, used []bool) {
			if i == k {
				best = math.Max(best, score(p))
				return
			}
			for j := 0; j < ke; j++ {
				if !used[j] {
					used[j] = true
					rec(i+1, append(p, j), used)
					used[j] = false
				}
			}
		}
		rec(0, nil, make([]bool, ke))
		if got := score(perm); got < best-1e-12 {
			t.Fatalf("seed %d: Hungarian score %.15g < brute force %.15g", seed, got, best)
		}
	}
}

func TestMatchRowsErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	if _, err := MatchRows(testutil.RandDense(rng, 3, 4), testutil.RandDense(rng, 3, 5)); !errors.Is(err, ErrShape) {
		t.Errorf("column mismatch: %v", err)
	}
	if _, err := MatchRows(testutil.RandDense(rng, 4, 4), testutil.RandDense(rng, 3, 4)); !errors.Is(err, ErrShape) {
		t.Errorf("fewer est rows: %v", err)
	}
	if _, err := MatchRows(nil, testutil.RandDense(rng, 3, 4)); !errors.Is(err, ErrShape) {
		t.Errorf("nil: %v", err)
	}
	z := testutil.RandDense(rng, 3, 4)
	z.SetRow(1, []float64{0, 0, 0, 0})
	if _, err := MatchRows(z, testutil.RandDense(rng, 3, 4)); !errors.Is(err, ErrZeroRow) {
		t.Errorf("zero row: %v", err)
	}
	nan := testutil.RandDense(rng, 2, 2)
	nan.Set(0, 0, math.NaN())
	if _, err := MatchRows(testutil.RandDense(rng, 2, 2), nan); !errors.Is(err, ErrNotFinite) {
		t.Errorf("NaN: %v", err)
	}
}

// The error fields measure what their docs say.
func TestCompareTwoLayerKnownErrors(t *testing.T) {
	v := mat.NewDense(2, 2, []float64{2, 0, 0, 3}) // unit rows e1, e2 after normalising
	u := mat.NewDense(2, 2, []float64{1, 0, 0, 1}) // normalised U = diag(2, 3)
	const eps = 1e-6
	// Est: unit 0 rotated by eps, unit 1's U column scaled by (1+10·eps); swapped order.
	v2 := mat.NewDense(2, 2, []float64{0, 5, math.Cos(eps), math.Sin(eps)})
	u2 := mat.NewDense(2, 2, []float64{0, 2, 3 * (1 + 10*eps) / 5, 0})
	e, err := CompareTwoLayer(nn.NewTwoLayer(v, u), nn.NewTwoLayer(v2, u2))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Perm, []int{1, 0}) {
		t.Fatalf("perm = %v", e.Perm)
	}
	if math.Abs(e.MaxRowErrV-2*math.Sin(eps/2)) > 1e-15 {
		t.Errorf("MaxRowErrV = %.17g, want %.17g", e.MaxRowErrV, 2*math.Sin(eps/2))
	}
	if math.Abs(e.MaxColErrU-10*eps) > 1e-14 {
		t.Errorf("MaxColErrU = %.17g, want %g", e.MaxColErrU, 10*eps)
	}
	// ‖ÛΠ − U*‖_F/‖U*‖_F = 3·10ε / √(4+9).
	if want := 30 * eps / math.Sqrt(13); math.Abs(e.RelErrU-want) > 1e-14 {
		t.Errorf("RelErrU = %.17g, want %.17g", e.RelErrU, want)
	}
	if e.MaxRelErr != math.Max(e.MaxRowErrV, e.MaxColErrU) {
		t.Errorf("MaxRelErr = %v", e.MaxRelErr)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"max_row_err_v"`, `"rel_err_u"`, `"max_col_err_u"`, `"max_rel_err"`, `"perm":[1,0]`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}

func TestCompareTwoLayerErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	base := nn.NewTwoLayer(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 2, 3))
	withBias := nn.NewTwoLayer(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 2, 3))
	withBias.Layers[0].Bias = []float64{0, 0.5, 0}
	zeroBias := nn.NewTwoLayer(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 2, 3))
	zeroBias.Layers[0].Bias = []float64{0, 0, 0}
	wrongAct := nn.NewTwoLayer(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 2, 3))
	wrongAct.Layers[0].Act = nn.Identity
	three := &nn.MLP{Layers: []nn.Layer{
		{Weight: testutil.RandDense(rng, 3, 5), Act: nn.ReLU},
		{Weight: testutil.RandDense(rng, 3, 3), Act: nn.ReLU},
		{Weight: testutil.RandDense(rng, 2, 3), Act: nn.Identity},
	}}
	broken := nn.NewTwoLayer(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 2, 4)) // U has 4 columns for 3 units
	deadV := testutil.RandDense(rng, 3, 5)
	deadV.SetRow(0, make([]float64, 5))
	dead := nn.NewTwoLayer(deadV, testutil.RandDense(rng, 2, 3))
	cases := []struct {
		name string
		est  *nn.MLP
		want error
	}{
		{"nil", nil, ErrShape},
		{"different d", nn.NewTwoLayer(testutil.RandDense(rng, 3, 4), testutil.RandDense(rng, 2, 3)), ErrShape},
		{"different k", nn.NewTwoLayer(testutil.RandDense(rng, 4, 5), testutil.RandDense(rng, 2, 4)), ErrShape},
		{"different m", nn.NewTwoLayer(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 3, 3)), ErrShape},
		{"bias", withBias, ErrNotTwoLayer},
		{"activation", wrongAct, ErrNotTwoLayer},
		{"three layers", three, ErrNotTwoLayer},
		{"layers do not chain", broken, ErrShape},
		{"dead unit", dead, ErrZeroRow},
	}
	for _, tc := range cases {
		if _, err := CompareTwoLayer(base, tc.est); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := CompareTwoLayer(tc.est, base); !errors.Is(err, tc.want) {
			t.Errorf("%s (as truth): err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := CompareTwoLayer(base, zeroBias); err != nil {
		t.Errorf("an all-zero bias counts as no bias: %v", err)
	}
}

func TestRelResidual(t *testing.T) {
	y := mat.NewDense(2, 2, []float64{3, 0, 0, 4})
	yh := mat.NewDense(2, 2, []float64{3, 1, 0, 4})
	if r := RelResidual(y, yh); math.Abs(r-0.2) > 1e-16 {
		t.Errorf("RelResidual = %v, want 0.2", r)
	}
	// Near the float64 range: a naive ‖·‖ overflows to Inf (or 0/0) here.
	big := mat.NewDense(1, 2, []float64{1e308, -1e308})
	bigh := mat.NewDense(1, 2, []float64{-1e308, -1e308})
	if r := RelResidual(big, bigh); math.Abs(r-math.Sqrt2) > 1e-15 {
		t.Errorf("huge entries: %v, want √2", r)
	}
	tiny := mat.NewDense(1, 2, []float64{3e-310, 4e-310})
	tinyh := mat.NewDense(1, 2, []float64{3e-310, 0})
	if r := RelResidual(tiny, tinyh); math.Abs(r-0.8) > 1e-3 {
		t.Errorf("tiny entries: %v, want 0.8", r)
	}
	z := mat.NewDense(1, 2, nil)
	if r := RelResidual(z, z); r != 0 {
		t.Errorf("0/0 = %v, want 0", r)
	}
	if r := RelResidual(z, y.Slice(0, 1, 0, 2)); !math.IsInf(r, 1) {
		t.Errorf("x/0 = %v, want +Inf", r)
	}
	if r := RelResidual(y, mat.NewDense(2, 3, nil)); !math.IsNaN(r) {
		t.Errorf("shape mismatch = %v, want NaN", r)
	}
	var nilD *mat.Dense
	if r := RelResidual(nilD, y); !math.IsNaN(r) {
		t.Errorf("nil = %v, want NaN", r)
	}
	// Non-Dense matrices take the generic path and agree.
	if r := RelResidual(y.T(), yh.T()); math.Abs(r-0.2) > 1e-16 {
		t.Errorf("transposed: %v", r)
	}
}

func TestMaxAngle(t *testing.T) {
	truth := mat.NewDense(2, 2, []float64{1, 0, 0, 1})
	const th = 1e-9
	est := mat.NewDense(2, 2, []float64{0, 7, 2 * math.Cos(th), 2 * math.Sin(th)})
	if a := MaxAngle(truth, est, []int{1, 0}); math.Abs(a-th) > 1e-20 {
		t.Errorf("MaxAngle = %.17g, want %g", a, th)
	}
	if a := MaxAngle(truth, est, []int{0, 1}); math.Abs(a-math.Pi/2) > 1e-9 {
		t.Errorf("MaxAngle(wrong perm) = %v, want π/2", a)
	}
	for _, p := range [][]int{{0}, {0, 2}, {-1, 0}} {
		if a := MaxAngle(truth, est, p); !math.IsNaN(a) {
			t.Errorf("perm %v: %v, want NaN", p, a)
		}
	}
}
