package linalg

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// QR is the Householder QR factorization a = Q·R of a tall r×c matrix
// (r ≥ c), computed by the same blocked, parallel TSQR as ThinSVD. Q (r×c,
// orthonormal columns) is never formed: ApplyQT applies Qᵀ through the stored
// reflectors. It is the numerically preferred way to whiten data: RᵀR = aᵀa
// without ever forming aᵀa, so κ(R) = κ(a) rather than κ(a)².
type QR struct {
	t *tallQR
}

// NewQR factorizes a (r×c, r ≥ c), which is not modified. It returns an error
// wrapping ErrShape for a nil, empty or wide matrix and ErrNotFinite for NaN
// or Inf entries.
func NewQR(a mat.Matrix) (*QR, error) {
	d, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.NewQR: %w", err)
	}
	r, c := d.Dims()
	if r < c {
		return nil, fmt.Errorf("linalg.NewQR: %w: a is %d×%d; QR whitening needs at least as many rows as columns", ErrShape, r, c)
	}
	return &QR{t: newTallQR(d.RawMatrix())}, nil
}

// R returns the c×c upper triangular factor (a new matrix). Its diagonal may
// have either sign, as LAPACK's Geqrf leaves it.
func (q *QR) R() *mat.Dense {
	g := q.t.r()
	return mat.NewDense(g.Rows, g.Cols, g.Data)
}

// ApplyQT returns the c×k matrix Qᵀ·b for an r×k matrix b (not modified): the
// coordinates of b's columns in the orthonormal basis Q of col(a), i.e. the
// part of b that a can explain.
func (q *QR) ApplyQT(b mat.Matrix) (*mat.Dense, error) {
	d, err := view("b", b)
	if err != nil {
		return nil, fmt.Errorf("linalg.QR.ApplyQT: %w", err)
	}
	r, k := d.Dims()
	if r != q.t.rows {
		return nil, fmt.Errorf("linalg.QR.ApplyQT: %w: b has %d rows, a had %d", ErrShape, r, q.t.rows)
	}
	g := q.t.applyQT(d.RawMatrix())
	return mat.NewDense(q.t.cols, k, g.Data), nil
}
