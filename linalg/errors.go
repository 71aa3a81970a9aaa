package linalg

import (
	"fmt"
	"math"
	"reflect"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/kern"
)

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can branch with errors.Is.
var (
	// ErrShape reports a nil or empty matrix, or dimensions that do not fit
	// together.
	ErrShape = errs.New("linalg: bad shape", nil)
	// ErrNotFinite reports a NaN or ±Inf entry. Factorizations given such
	// input either loop or return garbage, so they are refused up front.
	ErrNotFinite = errs.New("linalg: NaN or Inf entry", nil)
	// ErrRankDeficient reports a matrix whose numerical rank is below what
	// the operation needs (a unique least-squares solution, a non-trivial
	// subspace).
	ErrRankDeficient = errs.New("linalg: numerically rank deficient", nil)
	// ErrNotPositiveDefinite reports a symmetric matrix with an eigenvalue
	// that is not safely positive.
	ErrNotPositiveDefinite = errs.New("linalg: not positive definite", nil)
	// ErrNoConvergence reports that an iterative factorization (SVD or
	// symmetric eigendecomposition) did not converge.
	ErrNoConvergence = errs.New("linalg: factorization did not converge", nil)
)

// isNil reports whether an interface holds nothing or a nil pointer; calling
// Dims on a nil *mat.Dense panics, and the package promises errors instead.
func isNil(a any) bool {
	if a == nil {
		return true
	}
	v := reflect.ValueOf(a)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// view returns a's entries as a *mat.Dense, checked for shape and finiteness.
// A *mat.Dense is returned as is (no copy), so callers must not modify the
// result; other Matrix types are copied once.
func view(name string, a mat.Matrix) (*mat.Dense, error) {
	if isNil(a) {
		return nil, fmt.Errorf("%w: %s is nil", ErrShape, name)
	}
	r, c := a.Dims()
	if r <= 0 || c <= 0 {
		return nil, fmt.Errorf("%w: %s is empty (%d×%d)", ErrShape, name, r, c)
	}
	d, ok := a.(*mat.Dense)
	if !ok {
		d = mat.DenseCopyOf(a)
	}
	raw := d.RawMatrix()
	for i := 0; i < r; i++ {
		row := raw.Data[i*raw.Stride : i*raw.Stride+c]
		if kern.Finite(row) {
			continue
		}
		for j, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: %s[%d,%d] = %v", ErrNotFinite, name, i, j, x)
			}
		}
	}
	return d, nil
}

// defaultTol is the rank tolerance used when a caller passes rtol ≤ 0: the
// numpy.linalg.matrix_rank convention max(r, c)·ε, i.e. what rounding alone
// can produce in a backward-stable SVD.
func defaultTol(r, c int) float64 {
	const eps = 0x1p-52
	return float64(max(r, c)) * eps
}
