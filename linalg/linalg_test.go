package linalg

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

const eps = 0x1p-52

// lowRank returns an r×c matrix of exact rank k (in exact arithmetic).
func lowRank(r, c, k int, rng *rand.Rand) *mat.Dense {
	var m mat.Dense
	m.Mul(testutil.RandDense(rng, r, k), testutil.RandDense(rng, k, c))
	return &m
}

// orthoErr is ‖qᵀq − I‖_max.
func orthoErr(q mat.Matrix) float64 {
	_, c := q.Dims()
	var g mat.Dense
	g.Mul(q.T(), q)
	worst := 0.0
	for i := 0; i < c; i++ {
		for j := 0; j < c; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			worst = math.Max(worst, math.Abs(g.At(i, j)-want))
		}
	}
	return worst
}

func reconstruct(u *mat.Dense, s []float64, v *mat.Dense) *mat.Dense {
	us := mat.DenseCopyOf(u)
	r, c := us.Dims()
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			us.Set(i, j, us.At(i, j)*s[j])
		}
	}
	var out mat.Dense
	out.Mul(us, v.T())
	return &out
}

func TestThinSVDIdentities(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Shapes cover: square, near-square tall, wide, the TSQR route with one
	// block, several blocks, and three recursion levels (6000×200: 9 blocks →
	// 1800 stacked rows → 2 blocks → 400 rows).
	shapes := [][2]int{{1, 1}, {5, 5}, {7, 4}, {4, 7}, {100, 7}, {7, 100}, {30000, 20}, {6000, 200}, {1, 9}, {9, 1}}
	for _, sh := range shapes {
		r, c := sh[0], sh[1]
		a := testutil.RandDense(rng, r, c)
		u, s, v, err := ThinSVD(a)
		if err != nil {
			t.Fatalf("%d×%d: %v", r, c, err)
		}
		p := min(r, c)
		if ur, uc := u.Dims(); ur != r || uc != p {
			t.Fatalf("%d×%d: u is %d×%d", r, c, ur, uc)
		}
		if vr, vc := v.Dims(); vr != c || vc != p {
			t.Fatalf("%d×%d: v is %d×%d", r, c, vr, vc)
		}
		if len(s) != p {
			t.Fatalf("%d×%d: len(s) = %d", r, c, len(s))
		}
		for i := 1; i < p; i++ {
			if s[i] > s[i-1] || s[i] < 0 {
				t.Fatalf("%d×%d: s not descending/non-negative at %d: %v", r, c, i, s)
			}
		}
		if e := testutil.RelDiff(reconstruct(u, s, v), a); e > 1e-13 {
			t.Errorf("%d×%d: reconstruction error %.3g", r, c, e)
		}
		if e := orthoErr(u); e > 1e-13 {
			t.Errorf("%d×%d: uᵀu − I = %.3g", r, c, e)
		}
		if e := orthoErr(v); e > 1e-13 {
			t.Errorf("%d×%d: vᵀv − I = %.3g", r, c, e)
		}
		// Same values as gonum's direct LAPACK SVD.
		var f mat.SVD
		if !f.Factorize(a, mat.SVDThin) {
			t.Fatal("gonum SVD failed")
		}
		ref := f.Values(nil)
		for i := range s {
			if math.Abs(s[i]-ref[i]) > 1e-13*ref[0] {
				t.Errorf("%d×%d: s[%d] = %v, gonum %v", r, c, i, s[i], ref[i])
			}
		}
	}
}

// The exact-rank test of the two-layer route: a tall matrix of exact rank k
// must show σ_{k+1}/σ_1 at rounding level, far below the 1e-10 threshold, and
// small singular values of a full-rank matrix must carry only ~ε·σ_1 absolute
// error (relative to σ_1) down to 1e-14.
func TestThinSVDSmallSingularValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, r := range []int{300, 50000} {
		a := lowRank(r, 12, 5, rng)
		_, s, _, err := ThinSVD(a)
		if err != nil {
			t.Fatal(err)
		}
		if s[4]/s[0] < 1e-3 {
			t.Fatalf("r=%d: σ5/σ1 = %.3g, instance degenerate", r, s[4]/s[0])
		}
		if s[5]/s[0] > 1e-14 {
			t.Errorf("r=%d: σ6/σ1 = %.3g for an exactly rank-5 matrix, want < 1e-14", r, s[5]/s[0])
		}
		if got := NumericalRank(s, 1e-10); got != 5 {
			t.Errorf("r=%d: NumericalRank = %d, want 5", r, got)
		}
	}

	// a = Q1·diag(σ)·Q2ᵀ with σ log-spaced from 1 to 1e-14.
	const r, c = 20000, 15
	q1, err := Orth(testutil.RandDense(rng, r, c))
	if err != nil {
		t.Fatal(err)
	}
	q2 := RandomOrthogonal(c, rng)
	sig := make([]float64, c)
	for i := range sig {
		sig[i] = math.Pow(10, -14*float64(i)/float64(c-1))
	}
	a := reconstruct(q1, sig, q2)
	_, s, _, err := ThinSVD(a)
	if err != nil {
		t.Fatal(err)
	}
	for i := range s {
		if d := math.Abs(s[i] - sig[i]); d > 50*eps*sig[0] {
			t.Errorf("σ%d = %.6g, want %.6g (|Δ| = %.2g·ε·σ1)", i, s[i], sig[i], d/eps)
		}
	}
}

func TestThinSVDBadInput(t *testing.T) {
	var nilDense *mat.Dense
	nan := mat.NewDense(2, 2, []float64{1, math.NaN(), 0, 1})
	inf := mat.NewDense(2, 2, []float64{1, math.Inf(1), 0, 1})
	cases := []struct {
		name string
		a    mat.Matrix
		want error
	}{
		{"nil interface", nil, ErrShape},
		{"nil *Dense", nilDense, ErrShape},
		{"empty Dense", &mat.Dense{}, ErrShape},
		{"NaN", nan, ErrNotFinite},
		{"Inf", inf, ErrNotFinite},
	}
	for _, tc := range cases {
		if _, _, _, err := ThinSVD(tc.a); !errors.Is(err, tc.want) {
			t.Errorf("%s: ThinSVD err = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := Pinv(tc.a, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: Pinv err = %v", tc.name, err)
		}
		if _, err := NullSpace(tc.a, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: NullSpace err = %v", tc.name, err)
		}
		if _, err := Orth(tc.a); !errors.Is(err, tc.want) {
			t.Errorf("%s: Orth err = %v", tc.name, err)
		}
		if c := Cond(tc.a); !math.IsNaN(c) {
			t.Errorf("%s: Cond = %v, want NaN", tc.name, c)
		}
		if _, err := LstSq(tc.a, mat.NewDense(2, 1, nil)); !errors.Is(err, tc.want) {
			t.Errorf("%s: LstSq err = %v", tc.name, err)
		}
		if _, err := PrincipalAngles(tc.a, mat.NewDense(2, 1, []float64{1, 0})); !errors.Is(err, tc.want) {
			t.Errorf("%s: PrincipalAngles err = %v", tc.name, err)
		}
		if _, err := Procrustes(tc.a, mat.NewDense(2, 2, nil)); !errors.Is(err, tc.want) {
			t.Errorf("%s: Procrustes err = %v", tc.name, err)
		}
		if _, _, _, err := TopK(tc.a, 1); !errors.Is(err, tc.want) {
			t.Errorf("%s: TopK err = %v", tc.name, err)
		}
	}
}

func TestThinSVDDoesNotModifyInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][2]int{{40, 3}, {3, 40}, {10, 8}} {
		a := testutil.RandDense(rng, sh[0], sh[1])
		orig := mat.DenseCopyOf(a)
		if _, _, _, err := ThinSVD(a); err != nil {
			t.Fatal(err)
		}
		if _, err := LstSq(a, a); err != nil && sh[0] >= sh[1] {
			t.Fatal(err)
		}
		if !mat.Equal(a, orig) {
			t.Errorf("%v: input modified", sh)
		}
	}
}

func TestThinSVDSubmatrixView(t *testing.T) {
	// A sliced view has stride > cols; the TSQR must honour it.
	rng := rand.New(rand.NewPCG(7, 8))
	big := testutil.RandDense(rng, 12000, 9)
	a := big.Slice(1000, 11000, 2, 7).(*mat.Dense)
	u, s, v, err := ThinSVD(a)
	if err != nil {
		t.Fatal(err)
	}
	if e := testutil.RelDiff(reconstruct(u, s, v), a); e > 1e-13 {
		t.Errorf("reconstruction of a view: %.3g", e)
	}
}

func TestTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	a := testutil.RandDense(rng, 500, 8)
	_, sAll, _, err := ThinSVD(a)
	if err != nil {
		t.Fatal(err)
	}
	u, s, v, err := TopK(a, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ur, uc := u.Dims(); ur != 500 || uc != 3 {
		t.Fatalf("u is %d×%d", ur, uc)
	}
	if vr, vc := v.Dims(); vr != 8 || vc != 3 {
		t.Fatalf("v is %d×%d", vr, vc)
	}
	for i := range s {
		if s[i] != sAll[i] {
			t.Errorf("s[%d] = %v, want %v", i, s[i], sAll[i])
		}
	}
	// a·v_i = s_i·u_i.
	var av mat.Dense
	av.Mul(a, v)
	for i := 0; i < 3; i++ {
		for r := 0; r < 500; r++ {
			if d := math.Abs(av.At(r, i) - s[i]*u.At(r, i)); d > 1e-12*s[0] {
				t.Fatalf("a·v%d ≠ s%d·u%d at row %d (%.3g)", i, i, i, r, d)
			}
		}
	}
	for _, k := range []int{0, -1, 9} {
		if _, _, _, err := TopK(a, k); !errors.Is(err, ErrShape) {
			t.Errorf("TopK(k=%d) err = %v, want ErrShape", k, err)
		}
	}
}

func TestNumericalRank(t *testing.T) {
	cases := []struct {
		s    []float64
		rtol float64
		want int
	}{
		{nil, 1e-10, 0},
		{[]float64{0, 0}, 1e-10, 0},
		{[]float64{3, 2, 1}, 1e-10, 3},
		{[]float64{1, 1e-9, 1e-11}, 1e-10, 2},
		{[]float64{1, 1e-10}, 1e-10, 1}, // strictly greater
		{[]float64{math.NaN(), 1}, 1e-10, 0},
	}
	for _, tc := range cases {
		if got := NumericalRank(tc.s, tc.rtol); got != tc.want {
			t.Errorf("NumericalRank(%v, %v) = %d, want %d", tc.s, tc.rtol, got, tc.want)
		}
	}
}

func TestPinvPenrose(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, a := range []*mat.Dense{lowRank(30, 8, 3, rng), lowRank(8, 30, 3, rng), testutil.RandDense(rng, 6, 6), testutil.RandDense(rng, 200, 4)} {
		p, err := Pinv(a, 1e-10)
		if err != nil {
			t.Fatal(err)
		}
		r, c := a.Dims()
		if pr, pc := p.Dims(); pr != c || pc != r {
			t.Fatalf("pinv of %d×%d is %d×%d", r, c, pr, pc)
		}
		var apa, pap, ap, pa mat.Dense
		ap.Mul(a, p)
		pa.Mul(p, a)
		apa.Mul(&ap, a)
		pap.Mul(&pa, p)
		if e := testutil.RelDiff(&apa, a); e > 1e-12 {
			t.Errorf("%d×%d: ‖A A⁺ A − A‖ rel = %.3g", r, c, e)
		}
		if e := testutil.RelDiff(&pap, p); e > 1e-12 {
			t.Errorf("%d×%d: ‖A⁺ A A⁺ − A⁺‖ rel = %.3g", r, c, e)
		}
		if e := testutil.RelDiff(ap.T(), &ap); e > 1e-12 {
			t.Errorf("%d×%d: A A⁺ not symmetric (%.3g)", r, c, e)
		}
		if e := testutil.RelDiff(pa.T(), &pa); e > 1e-12 {
			t.Errorf("%d×%d: A⁺ A not symmetric (%.3g)", r, c, e)
		}
	}
	z, err := Pinv(mat.NewDense(3, 2, nil), 0)
	if err != nil || mat.Norm(z, 1) != 0 {
		t.Errorf("Pinv(0) = %v, %v; want zero", z, err)
	}
}

func TestNullSpace(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	cases := []struct {
		a    *mat.Dense
		want int // null space dimension
	}{
		{lowRank(20, 6, 3, rng), 3},        // tall, rank deficient
		{lowRank(9, 6, 3, rng), 3},         // near-square tall (direct SVD route)
		{testutil.RandDense(rng, 3, 8), 5}, // wide, full row rank
		{lowRank(4, 8, 2, rng), 6},         // wide, rank deficient
		{lowRank(5000, 7, 6, rng), 1},      // TSQR route
	}
	for i, tc := range cases {
		ns, err := NullSpace(tc.a, 1e-10)
		if err != nil {
			t.Fatal(err)
		}
		_, c := tc.a.Dims()
		nr, nc := ns.Dims()
		if nr != c || nc != tc.want {
			t.Fatalf("case %d: null space is %d×%d, want %d×%d", i, nr, nc, c, tc.want)
		}
		if e := orthoErr(ns); e > 1e-13 {
			t.Errorf("case %d: not orthonormal (%.3g)", i, e)
		}
		var an mat.Dense
		an.Mul(tc.a, ns)
		if e := mat.Norm(&an, 2) / mat.Norm(tc.a, 2); e > 1e-13 {
			t.Errorf("case %d: ‖a·N‖/‖a‖ = %.3g", i, e)
		}
	}
	if ns, err := NullSpace(testutil.RandDense(rng, 10, 4), 0); err != nil || ns != nil {
		t.Errorf("full column rank: got %v, %v; want nil, nil", ns, err)
	}
	ns, err := NullSpace(mat.NewDense(2, 3, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, nc := ns.Dims(); nc != 3 {
		t.Errorf("null space of the zero 2×3 matrix has %d columns, want 3", nc)
	}
}

func TestOrth(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, tc := range []struct {
		a    *mat.Dense
		rank int
	}{{lowRank(40, 10, 4, rng), 4}, {testutil.RandDense(rng, 5, 9), 5}, {testutil.RandDense(rng, 3000, 6), 6}} {
		q, err := Orth(tc.a)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := tc.a.Dims()
		if qr, qc := q.Dims(); qr != r || qc != tc.rank {
			t.Fatalf("Orth is %d×%d, want %d×%d", qr, qc, r, tc.rank)
		}
		if e := orthoErr(q); e > 1e-13 {
			t.Errorf("not orthonormal (%.3g)", e)
		}
		// The span contains a: Q·Qᵀ·a = a.
		var qta, proj mat.Dense
		qta.Mul(q.T(), tc.a)
		proj.Mul(q, &qta)
		if e := testutil.RelDiff(&proj, tc.a); e > 1e-13 {
			t.Errorf("Q·Qᵀ·a ≠ a (%.3g)", e)
		}
	}
	if q, err := Orth(mat.NewDense(3, 3, nil)); q != nil || err != nil {
		t.Errorf("Orth(0) = %v, %v; want nil, nil", q, err)
	}
}

func TestCond(t *testing.T) {
	if c := Cond(mat.NewDiagDense(3, []float64{1, 1, 1})); math.Abs(c-1) > 1e-15 {
		t.Errorf("Cond(I) = %v", c)
	}
	if c := Cond(mat.NewDense(2, 2, []float64{10, 0, 0, -0.5})); math.Abs(c-20) > 1e-13 {
		t.Errorf("Cond(diag(10, −0.5)) = %v, want 20", c)
	}
	if c := Cond(mat.NewDense(2, 2, []float64{1, 2, 2, 4})); !math.IsInf(c, 1) && c < 1e15 {
		t.Errorf("Cond(singular) = %v, want +Inf or ≥ 1e15", c)
	}
	if c := Cond(mat.NewDense(2, 2, nil)); !math.IsInf(c, 1) {
		t.Errorf("Cond(0) = %v, want +Inf", c)
	}
	// Tall route: a = Q·diag(σ)·Wᵀ has κ = σ1/σk exactly.
	rng := rand.New(rand.NewPCG(17, 18))
	q, _ := Orth(testutil.RandDense(rng, 10000, 4))
	w := RandomOrthogonal(4, rng)
	a := reconstruct(q, []float64{1e3, 10, 2, 1e-3}, w)
	if c := Cond(a); math.Abs(c/1e6-1) > 1e-9 {
		t.Errorf("Cond = %v, want 1e6", c)
	}
}

func TestLstSq(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, sh := range [][2]int{{5, 5}, {50, 7}, {30000, 20}} {
		r, c := sh[0], sh[1]
		a := testutil.RandDense(rng, r, c)
		x0 := testutil.RandDense(rng, c, 3)
		var b mat.Dense
		b.Mul(a, x0)
		// Consistent system: the solution is exact to rounding.
		x, err := LstSq(a, &b)
		if err != nil {
			t.Fatal(err)
		}
		if e := testutil.RelDiff(x, x0); e > 1e-12 {
			t.Errorf("%d×%d consistent: rel error %.3g", r, c, e)
		}
		// Inconsistent system: the residual is orthogonal to col(a).
		noisy := mat.DenseCopyOf(&b)
		noisy.Add(noisy, testutil.RandDense(rng, r, 3))
		x, err = LstSq(a, noisy)
		if err != nil {
			t.Fatal(err)
		}
		var res, g mat.Dense
		res.Mul(a, x)
		res.Sub(noisy, &res)
		g.Mul(a.T(), &res)
		if e := mat.Norm(&g, 2) / (mat.Norm(a, 2) * mat.Norm(&res, 2)); e > 1e-12 && r > c {
			t.Errorf("%d×%d: aᵀ·residual not 0 (%.3g)", r, c, e)
		}
	}
	// Rank deficient: error naming the condition number.
	a := lowRank(40, 6, 4, rng)
	_, err := LstSq(a, testutil.RandDense(rng, 40, 1))
	if !errors.Is(err, ErrRankDeficient) || !strings.Contains(err.Error(), "κ") {
		t.Errorf("rank deficient: err = %v", err)
	}
	if _, err := LstSq(testutil.RandDense(rng, 3, 5), testutil.RandDense(rng, 3, 1)); !errors.Is(err, ErrShape) {
		t.Errorf("underdetermined: err = %v", err)
	}
	if _, err := LstSq(testutil.RandDense(rng, 6, 2), testutil.RandDense(rng, 5, 1)); !errors.Is(err, ErrShape) {
		t.Errorf("row mismatch: err = %v", err)
	}
	if _, err := LstSq(testutil.RandDense(rng, 6, 2), nil); !errors.Is(err, ErrShape) {
		t.Errorf("nil b: err = %v", err)
	}
}

func TestPrincipalAngles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n = 9
	rot := RandomOrthogonal(n, rng)
	// a = span(e0, e1, e2); b = span(cos θi e_i + sin θi e_{3+i}), rotated by a
	// common orthogonal map (which preserves angles).
	thetas := []float64{1e-10, 0.3, math.Pi / 2}
	for _, rotate := range []bool{false, true} {
		a := mat.NewDense(n, 3, nil)
		b := mat.NewDense(n, 3, nil)
		for i, th := range thetas {
			a.Set(i, i, 1)
			b.Set(i, i, math.Cos(th))
			b.Set(3+i, i, math.Sin(th))
		}
		// Mix b's columns: the span, hence the angles, must not change.
		var bm mat.Dense
		bm.Mul(b, testutil.RandDense(rng, 3, 3))
		b = &bm
		if rotate {
			var ra, rb mat.Dense
			ra.Mul(rot, a)
			rb.Mul(rot, b)
			a, b = &ra, &rb
		}
		got, err := PrincipalAngles(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("got %d angles", len(got))
		}
		for i, th := range thetas {
			// The 1e-10 angle must keep relative accuracy: arccos of the
			// cosine alone would return 0 or 1.5e-8.
			if math.Abs(got[i]-th) > 1e-6*th+1e-14 {
				t.Errorf("rotate=%v: angle %d = %.17g, want %.17g", rotate, i, got[i], th)
			}
		}
	}
	// Same subspace → zeros; a 2-dim span vs a 3-dim span containing it.
	a := testutil.RandDense(rng, 20, 2)
	var b mat.Dense
	b.Mul(a, testutil.RandDense(rng, 2, 2))
	got, err := PrincipalAngles(a, &b)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g > 1e-14 {
			t.Errorf("same span: angle %.3g", g)
		}
	}
	wider := mat.NewDense(20, 3, nil)
	wider.Slice(0, 20, 0, 2).(*mat.Dense).Copy(a)
	wider.Slice(0, 20, 2, 3).(*mat.Dense).Copy(testutil.RandDense(rng, 20, 1))
	for _, pair := range [][2]mat.Matrix{{a, wider}, {wider, a}} {
		got, err := PrincipalAngles(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] > 1e-14 || got[1] > 1e-14 {
			t.Errorf("nested spans: %v", got)
		}
	}
	if _, err := PrincipalAngles(mat.NewDense(4, 2, nil), testutil.RandDense(rng, 4, 1)); !errors.Is(err, ErrRankDeficient) {
		t.Errorf("zero matrix: err = %v", err)
	}
	if _, err := PrincipalAngles(testutil.RandDense(rng, 4, 2), testutil.RandDense(rng, 5, 1)); !errors.Is(err, ErrShape) {
		t.Errorf("row mismatch: err = %v", err)
	}
}

func TestProcrustes(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	a := testutil.RandDense(rng, 50, 6)
	q0 := RandomOrthogonal(6, rng)
	var b mat.Dense
	b.Mul(a, q0)
	q, err := Procrustes(a, &b)
	if err != nil {
		t.Fatal(err)
	}
	if e := testutil.RelDiff(q, q0); e > 1e-12 {
		t.Errorf("exact rotation recovered with error %.3g", e)
	}
	// With noise: Q is orthogonal and beats every other orthogonal matrix tried.
	b.Add(&b, testutil.RandDense(rng, 50, 6))
	q, err = Procrustes(a, &b)
	if err != nil {
		t.Fatal(err)
	}
	if e := orthoErr(q); e > 1e-13 {
		t.Errorf("not orthogonal (%.3g)", e)
	}
	loss := func(q mat.Matrix) float64 {
		var d mat.Dense
		d.Mul(a, q)
		d.Sub(&d, &b)
		return mat.Norm(&d, 2)
	}
	best := loss(q)
	for i := 0; i < 50; i++ {
		var p mat.Dense
		// Small perturbations of the optimum: exp of a skew matrix ≈ I + S.
		s := testutil.RandDense(rng, 6, 6)
		var skew mat.Dense
		skew.Sub(s, s.T())
		skew.Scale(1e-3, &skew)
		var ip mat.Dense
		ip.Add(mat.NewDiagDense(6, []float64{1, 1, 1, 1, 1, 1}), &skew)
		pq, _ := Orth(&ip) // orthonormalise I + S
		p.Mul(q, pq)
		if l := loss(&p); l < best-1e-12 {
			t.Fatalf("perturbed rotation has lower loss %.15g < %.15g", l, best)
		}
	}
	if _, err := Procrustes(testutil.RandDense(rng, 5, 2), testutil.RandDense(rng, 5, 3)); !errors.Is(err, ErrShape) {
		t.Errorf("shape mismatch: err = %v", err)
	}
}

func TestSymInvSqrt(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const n = 7
	q := RandomOrthogonal(n, rng)
	lam := []float64{1, 2, 3, 5, 10, 50, 100}
	var qd mat.Dense
	qd.Mul(q, mat.NewDiagDense(n, lam))
	var sd mat.Dense
	sd.Mul(&qd, q.T())
	s := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			s.SetSym(i, j, 0.5*(sd.At(i, j)+sd.At(j, i)))
		}
	}
	w, kappa, err := SymInvSqrt(s)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(kappa/100-1) > 1e-12 {
		t.Errorf("κ = %v, want 100", kappa)
	}
	if !mat.Equal(w, w.T()) {
		t.Error("S^{-1/2} not exactly symmetric")
	}
	var wsw, tmp mat.Dense
	tmp.Mul(w, s)
	wsw.Mul(&tmp, w)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(wsw.At(i, j)-want) > 1e-12 {
				t.Fatalf("S^{-1/2}·S·S^{-1/2} [%d,%d] = %v", i, j, wsw.At(i, j))
			}
		}
	}

	notPD := mat.NewSymDense(2, []float64{1, 2, 2, 1}) // eigenvalues 3, −1
	_, _, err = SymInvSqrt(notPD)
	if !errors.Is(err, ErrNotPositiveDefinite) || !strings.Contains(err.Error(), "-1") {
		t.Errorf("indefinite: err = %v", err)
	}
	singular := mat.NewSymDense(2, []float64{1, 1, 1, 1})
	if _, _, err := SymInvSqrt(singular); !errors.Is(err, ErrNotPositiveDefinite) {
		t.Errorf("singular: err = %v", err)
	}
	var nilSym *mat.SymDense
	if _, _, err := SymInvSqrt(nilSym); !errors.Is(err, ErrShape) {
		t.Errorf("nil: err = %v", err)
	}
	if _, _, err := SymInvSqrt(mat.NewSymDense(1, []float64{math.NaN()})); !errors.Is(err, ErrNotFinite) {
		t.Errorf("NaN: err = %v", err)
	}
}

func TestRandomOrthogonal(t *testing.T) {
	if RandomOrthogonal(0, rand.New(rand.NewPCG(1, 1))) != nil || RandomOrthogonal(3, nil) != nil {
		t.Error("bad input should give nil")
	}
	a := RandomOrthogonal(12, rand.New(rand.NewPCG(27, 28)))
	b := RandomOrthogonal(12, rand.New(rand.NewPCG(27, 28)))
	if !mat.Equal(a, b) {
		t.Error("same seed, different matrices")
	}
	if e := orthoErr(a); e > 1e-14 {
		t.Errorf("QᵀQ − I = %.3g", e)
	}
	// Haar: E[Q] = 0. Without the sign fix Householder QR makes Q_00 < 0
	// always (LAPACK's R_00 = −sign(a_00)·‖a_0‖), so this test fails then.
	// Var(tr Q) = 1 under Haar, so the mean over 4000 draws has sd 0.016.
	rng := rand.New(rand.NewPCG(29, 30))
	const draws = 4000
	var pos, trace float64
	for i := 0; i < draws; i++ {
		q := RandomOrthogonal(3, rng)
		if q.At(0, 0) > 0 {
			pos++
		}
		trace += q.At(0, 0) + q.At(1, 1) + q.At(2, 2)
	}
	if f := pos / draws; math.Abs(f-0.5) > 0.04 {
		t.Errorf("P(Q00 > 0) = %.3f, want 0.5", f)
	}
	if m := trace / draws; math.Abs(m) > 0.08 {
		t.Errorf("E[tr Q] = %.3f, want 0", m)
	}
}

// BenchmarkThinSVD200000x50 is the shape of the exact route's rank test
// (n samples × a few dozen columns).
//
// Work floor (Householder, r = 200000, c = 50): QR 2rc² − 2c³/3 ≈ 1.0e9
// flops, applying Q to the c×c left singular vectors 2rc²·2 ≈ 2.0e9 (Ormqr on
// r×c), SVD of the 50×50 R negligible: ≈ 3.0e9 flops in all, i.e. ≈ 0.19 s at
// pure-Go gonum's ~16 GFLOP/s, ≈ 0.02 s at OpenBLAS's ~165 GFLOP/s. Bytes: the
// 80 MB input is read once and the 80 MB output written once (≈ 0.02 s at
// 10 GB/s), so the kernel is compute bound.
func BenchmarkThinSVD200000x50(b *testing.B) {
	a := testutil.RandDense(rand.New(rand.NewPCG(1, 2)), 200000, 50)
	b.SetBytes(200000 * 50 * 8)
	for b.Loop() {
		if _, _, _, err := ThinSVD(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGonumSVD200000x50 is the baseline: mat.SVD (LAPACK Dgesvd, which
// also reduces by QR first, but with gonum's unblocked Geqrf for c < 128).
func BenchmarkGonumSVD200000x50(b *testing.B) {
	a := testutil.RandDense(rand.New(rand.NewPCG(1, 2)), 200000, 50)
	b.SetBytes(200000 * 50 * 8)
	for b.Loop() {
		var f mat.SVD
		if !f.Factorize(a, mat.SVDThin) {
			b.Fatal("failed")
		}
	}
}

// BenchmarkLstSq200000x50 solves a 200000×50 system with one right-hand side.
// Floor: QR 1.0e9 flops + Qᵀb 0.04e9: ≈ 0.07 s at 16 GFLOP/s.
func BenchmarkLstSq200000x50(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := testutil.RandDense(rng, 200000, 50)
	y := testutil.RandDense(rng, 200000, 1)
	for b.Loop() {
		if _, err := LstSq(a, y); err != nil {
			b.Fatal(err)
		}
	}
}
