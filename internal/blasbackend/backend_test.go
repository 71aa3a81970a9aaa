package blasbackend_test

import (
	"fmt"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/blasbackend"
)

// TestNameMatchesInstalledBLAS checks that Name reports the implementation
// blas64 actually dispatches to, so a build tag that failed to take effect
// (or an init that was never linked in) cannot go unnoticed.
func TestNameMatchesInstalledBLAS(t *testing.T) {
	impl := fmt.Sprintf("%T", blas64.Implementation())
	switch name := blasbackend.Name(); name {
	case "OpenBLAS":
		if !blasbackend.Native() {
			t.Fatalf("Name() = %q but Native() is false", name)
		}
		if !strings.Contains(impl, "netlib") {
			t.Fatalf("Name() = %q but blas64 uses %s", name, impl)
		}
	case "gonum (pure Go)":
		if blasbackend.Native() {
			t.Fatalf("Name() = %q but Native() is true", name)
		}
		if !strings.HasPrefix(impl, "gonum.") {
			t.Fatalf("Name() = %q but blas64 uses %s", name, impl)
		}
	default:
		t.Fatalf("Name() = %q, want \"OpenBLAS\" or \"gonum (pure Go)\"", name)
	}
}

// TestBackendComputes runs a small product and a solve through mat (which
// calls blas64 and lapack64) and checks them exactly, so a backend that links
// but computes garbage (wrong ABI, wrong symbols) fails here.
func TestBackendComputes(t *testing.T) {
	a := mat.NewDense(3, 3, []float64{2, 1, 0, 1, 3, 1, 0, 1, 4})
	b := mat.NewDense(3, 2, []float64{1, 0, 0, 1, 1, 1})
	var c mat.Dense
	c.Mul(a, b)
	want := mat.NewDense(3, 2, []float64{2, 1, 2, 4, 4, 5})
	if !mat.Equal(&c, want) {
		t.Fatalf("%s: A·B =\n%v\nwant\n%v", blasbackend.Name(), mat.Formatted(&c), mat.Formatted(want))
	}
	var x mat.Dense
	if err := x.Solve(a, &c); err != nil {
		t.Fatalf("%s: solve: %v", blasbackend.Name(), err)
	}
	if !mat.EqualApprox(&x, b, 1e-14) {
		t.Fatalf("%s: A \\ (A·B) =\n%v\nwant B", blasbackend.Name(), mat.Formatted(&x))
	}
	var sym mat.SymDense
	sym.SymOuterK(1, a)
	var eig mat.EigenSym
	if !eig.Factorize(&sym, false) {
		t.Fatalf("%s: EigenSym failed", blasbackend.Name())
	}
	// A is symmetric, so the eigenvalues of A·Aᵀ are the squares of A's; the
	// product of A's is det(A) = 18.
	prod := 1.0
	for _, v := range eig.Values(nil) {
		prod *= v
	}
	if d := prod - 18*18; d > 1e-9 || d < -1e-9 {
		t.Fatalf("%s: product of eigenvalues of A·Aᵀ = %v, want 324", blasbackend.Name(), prod)
	}
}

func ExampleName() {
	// Prints "gonum (pure Go)" in the default build and "OpenBLAS" when built
	// with -tags openblas.
	fmt.Println(blasbackend.Name())
}
