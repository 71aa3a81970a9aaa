package linalg

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// LstSq returns the c×q matrix x minimising ‖a·x − b‖_F for an r×c matrix a
// with r ≥ c and an r×q right-hand side b, by Householder QR (the blocked TSQR
// of ThinSVD): x = R⁻¹·(Qᵀb). QR is used rather than the normal equations
// because they square κ(a), which would cap the accuracy of the project's
// "exact" linear solves at κ²·ε.
//
// When a is numerically rank deficient, κ(R) = κ(a) > 1/(max(r, c)·ε) (the
// numpy.linalg.lstsq default), the minimiser is not unique and LstSq returns
// an error wrapping ErrRankDeficient that states the condition number; use
// Pinv for the minimum-norm solution. Underdetermined systems (r < c) are
// refused with ErrShape for the same reason.
func LstSq(a, b mat.Matrix) (*mat.Dense, error) {
	da, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.LstSq: %w", err)
	}
	db, err := view("b", b)
	if err != nil {
		return nil, fmt.Errorf("linalg.LstSq: %w", err)
	}
	r, c := da.Dims()
	rb, q := db.Dims()
	if rb != r {
		return nil, fmt.Errorf("linalg.LstSq: %w: a has %d rows, b has %d", ErrShape, r, rb)
	}
	if r < c {
		return nil, fmt.Errorf("linalg.LstSq: %w: a is %d×%d (underdetermined, fewer rows than columns); use Pinv for the minimum-norm solution", ErrShape, r, c)
	}
	// The lean factorization keeps no copy of a; applyQT refactorizes its
	// leaf blocks (the same bits, one more pass over a).
	qr := newLeanQR(da.RawMatrix())
	rf := qr.r()
	_, s, _, err := gonumSVD(mat.NewDense(c, c, append([]float64(nil), rf.Data...)), false)
	if err != nil {
		return nil, fmt.Errorf("linalg.LstSq: %w", err)
	}
	kappa := condOf(s)
	if tol := defaultTol(r, c); !(kappa*tol < 1) {
		return nil, fmt.Errorf("linalg.LstSq: %w: κ(a) = %.3g ≥ 1/(max(r,c)·ε) = %.3g for a %d×%d matrix", ErrRankDeficient, kappa, 1/tol, r, c)
	}
	y := qr.applyQT(db.RawMatrix())
	blas64.Trsm(blas.Left, blas.NoTrans, 1,
		blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: c, Stride: c, Data: rf.Data}, y)
	return mat.NewDense(c, q, y.Data), nil
}
