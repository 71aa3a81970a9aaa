package linalg

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// ThinSVD returns the thin singular value decomposition a = u·diag(s)·vᵀ of an
// r×c matrix, with p = min(r, c), u r×p and v c×p with orthonormal columns and
// s (length p) non-negative and descending.
//
// Tall matrices (r ≥ 2c, e.g. n samples × a few columns) are first reduced by
// a blocked, parallel Householder QR (TSQR) and the SVD is taken of the c×c R
// factor. This never forms aᵀa, so every singular value carries an absolute
// error of a few ε·s[0]: ratios s[i]/s[0] are meaningful down to ~1e-15,
// which is what exact-rank tests such as σ_{k+1}/σ_1 < 1e-10 need (the Gram
// route would stop at ~1e-8). Wide matrices are handled by transposition.
func ThinSVD(a mat.Matrix) (u *mat.Dense, s []float64, v *mat.Dense, err error) {
	d, err := view("a", a)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("linalg.ThinSVD: %w", err)
	}
	u, s, v, err = thinSVD(d, true)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("linalg.ThinSVD: %w", err)
	}
	return u, s, v, nil
}

// thinSVD is ThinSVD on checked input; with vectors false only s is computed.
func thinSVD(d *mat.Dense, vectors bool) (u *mat.Dense, s []float64, v *mat.Dense, err error) {
	r, c := d.Dims()
	if r < c {
		vt, s, ut, err := thinSVD(mat.DenseCopyOf(d.T()), vectors)
		return ut, s, vt, err
	}
	if r < 2*c {
		return gonumSVD(d, vectors)
	}
	if !vectors {
		// Only R is needed: the lean factorization keeps no r×c copy.
		rf := mat.NewDense(c, c, newLeanQR(d.RawMatrix()).r().Data)
		_, s, _, err := gonumSVD(rf, false)
		return nil, s, nil, err
	}
	qr := newTallQR(d.RawMatrix())
	rf := mat.NewDense(c, c, qr.r().Data)
	ur, s, v, err := gonumSVD(rf, vectors)
	if err != nil {
		return nil, s, nil, err
	}
	return mat.NewDense(r, c, qr.qInPlace(ur.RawMatrix())), s, v, nil
}

// TallSVD is the thin SVD a = U·diag(S)·Vᵀ of a tall r×c matrix (r ≥ c)
// that holds S and V but not the r×c factor U: U's leading columns are
// computed on request (UCols) from a, through a TSQR that keeps only its
// small R factors. It takes O(c²) memory besides a, where ThinSVD takes two
// r×c buffers (the QR's copy of a, then U in its place), and its S, V and
// U columns are bit for bit those of ThinSVD. a must not change while the
// TallSVD is in use.
type TallSVD struct {
	// S holds the c singular values, descending; V (c×c) the right
	// singular vectors.
	S []float64
	V *mat.Dense

	qr *tallQR
	ur *mat.Dense // c×c left singular vectors of R
}

// NewTallSVD factorizes a (r×c); see TallSVD. A matrix with r < 2c is
// factorized as ThinSVD does and keeps its U. It returns an error wrapping
// ErrShape for a nil or empty matrix, ErrNotFinite for NaN
// or Inf entries and ErrNoConvergence when the SVD fails.
func NewTallSVD(a mat.Matrix) (*TallSVD, error) {
	d, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.NewTallSVD: %w", err)
	}
	r, c := d.Dims()
	t := &TallSVD{}
	var rf *mat.Dense
	if r < 2*c {
		// Not tall enough for the TSQR: ThinSVD's own route, keeping its
		// U (at most 2c×c).
		u, s, v, err := thinSVD(d, true)
		if err != nil {
			return nil, fmt.Errorf("linalg.NewTallSVD: %w", err)
		}
		t.S, t.V, t.ur = s, v, u
		return t, nil
	}
	t.qr = newLeanQR(d.RawMatrix())
	rf = mat.NewDense(c, c, t.qr.r().Data)
	if t.ur, t.S, t.V, err = gonumSVD(rf, true); err != nil {
		return nil, fmt.Errorf("linalg.NewTallSVD: %w", err)
	}
	return t, nil
}

// UCols returns the first q columns of U (r×q), 1 ≤ q ≤ min(r, c), as a new
// matrix: one pass over a, refactorizing its leaf blocks.
func (t *TallSVD) UCols(q int) *mat.Dense { return t.UColsTo(nil, q) }

// UColsTo is UCols computed into buf, whatever it holds, when it has room
// for the r×q entries (the result's backing is then buf[:r·q]); otherwise
// it allocates as UCols does. The bits are UCols' either way. It lets a
// caller that is done with an r×q matrix reuse its memory instead of
// holding two.
func (t *TallSVD) UColsTo(buf []float64, q int) *mat.Dense {
	if t.qr == nil {
		r, _ := t.ur.Dims()
		if len(buf) < r*q {
			return mat.DenseCopyOf(t.ur.Slice(0, r, 0, q))
		}
		u := mat.NewDense(r, q, buf[:r*q])
		u.Copy(t.ur.Slice(0, r, 0, q))
		return u
	}
	if len(buf) < t.qr.rows*q {
		buf = nil
	}
	return mat.NewDense(t.qr.rows, q, t.qr.qCols(t.ur.RawMatrix(), q, buf))
}

// gonumSVD wraps mat.SVD (LAPACK Dgesvd) with an error for non-convergence.
func gonumSVD(d *mat.Dense, vectors bool) (u *mat.Dense, s []float64, v *mat.Dense, err error) {
	kind := mat.SVDNone
	if vectors {
		kind = mat.SVDThin
	}
	var f mat.SVD
	if !f.Factorize(d, kind) {
		return nil, nil, nil, ErrNoConvergence
	}
	s = f.Values(nil)
	if vectors {
		u, v = new(mat.Dense), new(mat.Dense)
		f.UTo(u)
		f.VTo(v)
	}
	return u, s, v, nil
}

// TopK returns the k leading singular triplets of a: u r×k, s (length k,
// descending), v c×k. It computes the full thin SVD and truncates, which is
// exact and, for the tall-and-skinny matrices of this project, as cheap as an
// iterative method; 1 ≤ k ≤ min(r, c) is required.
func TopK(a mat.Matrix, k int) (u *mat.Dense, s []float64, v *mat.Dense, err error) {
	d, err := view("a", a)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("linalg.TopK: %w", err)
	}
	r, c := d.Dims()
	if k < 1 || k > min(r, c) {
		return nil, nil, nil, fmt.Errorf("linalg.TopK: %w: k = %d outside [1, %d] for a %d×%d matrix", ErrShape, k, min(r, c), r, c)
	}
	u, s, v, err = thinSVD(d, true)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("linalg.TopK: %w", err)
	}
	return firstCols(u, k), s[:k:k], firstCols(v, k), nil
}

// firstCols returns a copy of the first k columns of m.
func firstCols(m *mat.Dense, k int) *mat.Dense {
	r, _ := m.Dims()
	return mat.DenseCopyOf(m.Slice(0, r, 0, k))
}

// NumericalRank counts the singular values s[i] > rtol·s[0], for s sorted in
// descending order as ThinSVD returns it. It is 0 for an empty or zero s and
// counts nothing for NaN entries.
func NumericalRank(s []float64, rtol float64) int {
	if len(s) == 0 || !(s[0] > 0) {
		return 0
	}
	tol := rtol * s[0]
	n := 0
	for _, x := range s {
		if x > tol {
			n++
		}
	}
	return n
}

// Cond returns the 2-norm condition number σ_max/σ_min of a, taken over all
// min(r, c) singular values: +Inf when a is singular (or has fewer rows than
// columns with a zero singular value), NaN for nil, empty or non-finite input
// or when the SVD fails. Unlike mat.Cond it does not estimate: it computes the
// singular values (through the TSQR route for tall matrices).
func Cond(a mat.Matrix) float64 {
	d, err := view("a", a)
	if err != nil {
		return math.NaN()
	}
	_, s, _, err := thinSVD(d, false)
	if err != nil {
		return math.NaN()
	}
	return condOf(s)
}

// condOf is s[0]/s[last] for descending s.
func condOf(s []float64) float64 {
	lo := s[len(s)-1]
	if lo == 0 {
		return math.Inf(1)
	}
	return s[0] / lo
}
