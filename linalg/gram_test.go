package linalg

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
)

// rowFill serves the rows of [F Y] from stored matrices.
func rowFill(F, Y *mat.Dense) func(lo, hi int, dst blas64.General) {
	_, f := F.Dims()
	return func(lo, hi int, dst blas64.General) {
		for q := lo; q < hi; q++ {
			row := dst.Data[(q-lo)*dst.Stride : (q-lo)*dst.Stride+dst.Cols]
			copy(row[:f], F.RawRowView(q))
			copy(row[f:], Y.RawRowView(q))
		}
	}
}

func TestAddGramMatchesProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{1, 1}, {3, 2}, {7, 5}, {9, 6}, {1030, 17}, {64, 16}} {
		r, c := shape[0], shape[1]
		a := testutil.RandDense(rng, r, c)
		got := make([]float64, c*c)
		AddGram(got, a.RawMatrix())
		var want mat.Dense
		want.Mul(a.T(), a)
		for i := 0; i < c; i++ {
			for j := 0; j < c; j++ {
				if j < i {
					if got[i*c+j] != 0 {
						t.Fatalf("%d×%d: lower triangle touched at (%d,%d)", r, c, i, j)
					}
					continue
				}
				if math.Abs(got[i*c+j]-want.At(i, j)) > 1e-12*float64(r) {
					t.Fatalf("%d×%d: (%d,%d) = %g, want %g", r, c, i, j, got[i*c+j], want.At(i, j))
				}
			}
		}
	}
}

func TestGramLstSqMatchesQR(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n, f, q := 5000, 12, 3
	F := testutil.RandDense(rng, n, f)
	// Spread the column scales and correlate two columns: κ(F) ≈ 1e3.
	for i := 0; i < n; i++ {
		F.Set(i, 3, 1e4*F.At(i, 3))
		F.Set(i, 5, F.At(i, 4)+1e-3*F.At(i, 5))
	}
	Y := testutil.RandDense(rng, n, q)
	want, err := LstSq(F, Y)
	if err != nil {
		t.Fatal(err)
	}
	got, kappa, err := GramLstSq(context.Background(), n, f, q, 1, rowFill(F, Y))
	if err != nil {
		t.Fatal(err)
	}
	// Both are within the problem's sensitivity κ²·ε of the true minimiser
	// (the residual is large).
	if d := testutil.RelDiff(got, want); d > 10*kappa*kappa*eps {
		t.Errorf("‖C − C_QR‖/‖C_QR‖ = %.2e > 10·κ²·ε (κ = %.3g)", d, kappa)
	}
	// A consistent system is solved to rounding.
	var Yc mat.Dense
	Yc.Mul(F, want)
	got, _, err = GramLstSq(context.Background(), n, f, q, 1, rowFill(F, &Yc))
	if err != nil {
		t.Fatal(err)
	}
	var fit mat.Dense
	fit.Mul(F, got)
	if d := testutil.RelDiff(&fit, &Yc); d > 1e-13 {
		t.Errorf("consistent system: relative residual %.2e", d)
	}
	if d := testutil.RelDiff(got, want); d > 1e-13 {
		t.Errorf("consistent system: ‖C − C*‖/‖C*‖ = %.2e", d)
	}
}

func TestGramLstSqSameAtAnyGOMAXPROCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n, f, q := 40*GramChunk+17, 9, 2
	F, Y := testutil.RandDense(rng, n, f), testutil.RandDense(rng, n, q)
	var ref *mat.Dense
	for _, procs := range []int{1, 2, 3, 8} {
		old := runtime.GOMAXPROCS(procs)
		got, _, err := GramLstSq(context.Background(), n, f, q, 1, rowFill(F, Y))
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = got
			continue
		}
		if !mat.Equal(got, ref) {
			t.Fatalf("GOMAXPROCS=%d gives a different answer", procs)
		}
	}
}

func TestGramLstSqRefusesIllConditioned(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n, f := 2000, 6
	F, Y := testutil.RandDense(rng, n, f), testutil.RandDense(rng, n, 1)
	for i := 0; i < n; i++ {
		F.Set(i, 2, F.At(i, 1)+1e-7*F.At(i, 2)) // κ(F) ≈ 1e7: κ² past MaxGramCond
	}
	if _, _, err := GramLstSq(context.Background(), n, f, 1, 1, rowFill(F, Y)); !errors.Is(err, ErrIllConditioned) {
		t.Errorf("nearly dependent columns: err = %v, want ErrIllConditioned", err)
	}
	for i := 0; i < n; i++ {
		F.Set(i, 4, 0)
	}
	if _, _, err := GramLstSq(context.Background(), n, f, 1, 1, rowFill(F, Y)); !errors.Is(err, ErrIllConditioned) {
		t.Errorf("zero column: err = %v, want ErrIllConditioned", err)
	}
	F.Set(7, 0, math.NaN())
	if _, _, err := GramLstSq(context.Background(), n, f, 1, 1, rowFill(F, Y)); !errors.Is(err, ErrNotFinite) {
		t.Errorf("NaN: err = %v, want ErrNotFinite", err)
	}
	if _, _, err := GramLstSq(context.Background(), 3, f, 1, 1, rowFill(F, Y)); !errors.Is(err, ErrShape) {
		t.Errorf("n < f: err = %v, want ErrShape", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := GramLstSq(ctx, n, f, 1, 1, rowFill(testutil.RandDense(rng, n, f), Y)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}
