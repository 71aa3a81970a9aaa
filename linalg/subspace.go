package linalg

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Pinv returns the Moore–Penrose pseudo-inverse a⁺ (c×r) of an r×c matrix,
// v·diag(1/s)·uᵀ over the singular values s[i] > rcond·s[0]; smaller ones are
// treated as zero, as numpy.linalg.pinv does. rcond ≤ 0 means max(r, c)·ε.
// A zero matrix has the zero pseudo-inverse.
func Pinv(a mat.Matrix, rcond float64) (*mat.Dense, error) {
	d, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.Pinv: %w", err)
	}
	r, c := d.Dims()
	if rcond <= 0 || math.IsNaN(rcond) {
		rcond = defaultTol(r, c)
	}
	u, s, v, err := thinSVD(d, true)
	if err != nil {
		return nil, fmt.Errorf("linalg.Pinv: %w", err)
	}
	out := mat.NewDense(c, r, nil)
	rank := NumericalRank(s, rcond)
	if rank == 0 {
		return out, nil
	}
	// Scale the kept columns of v by 1/s, then multiply by the kept uᵀ.
	vs := mat.DenseCopyOf(v.Slice(0, c, 0, rank))
	for j := 0; j < rank; j++ {
		inv := 1 / s[j]
		for i := 0; i < c; i++ {
			vs.Set(i, j, vs.At(i, j)*inv)
		}
	}
	out.Mul(vs, u.Slice(0, r, 0, rank).T())
	return out, nil
}

// NullSpace returns a c×(c−rank) matrix with orthonormal columns spanning
// {x : a·x = 0} for an r×c matrix a, where rank counts the singular values
// above rtol·s[0] (rtol ≤ 0 means max(r, c)·ε). It returns (nil, nil) when the
// null space is {0} (a has full column rank), because a *mat.Dense cannot have
// zero columns; a zero matrix gives the c×c identity.
func NullSpace(a mat.Matrix, rtol float64) (*mat.Dense, error) {
	d, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.NullSpace: %w", err)
	}
	r, c := d.Dims()
	if rtol <= 0 || math.IsNaN(rtol) {
		rtol = defaultTol(r, c)
	}
	var s []float64
	var v *mat.Dense
	if r >= c {
		// The thin V is already c×c.
		_, s, v, err = thinSVD(d, true)
		if err != nil {
			return nil, fmt.Errorf("linalg.NullSpace: %w", err)
		}
	} else {
		// Wide: the null space lies outside the thin V, so ask for the full V.
		var f mat.SVD
		if !f.Factorize(d, mat.SVDFullV) {
			return nil, fmt.Errorf("linalg.NullSpace: %w", ErrNoConvergence)
		}
		s = f.Values(nil)
		v = new(mat.Dense)
		f.VTo(v)
	}
	rank := NumericalRank(s, rtol)
	if rank == c {
		return nil, nil
	}
	return mat.DenseCopyOf(v.Slice(0, c, rank, c)), nil
}

// Orth returns an r×rank matrix with orthonormal columns spanning the column
// space of a, where rank counts the singular values above max(r, c)·ε·s[0]
// (the numpy/scipy convention). It returns (nil, nil) for a zero matrix,
// whose column space is {0}.
func Orth(a mat.Matrix) (*mat.Dense, error) {
	d, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.Orth: %w", err)
	}
	q, err := orth(d)
	if err != nil {
		return nil, fmt.Errorf("linalg.Orth: %w", err)
	}
	return q, nil
}

func orth(d *mat.Dense) (*mat.Dense, error) {
	r, c := d.Dims()
	u, s, _, err := thinSVD(d, true)
	if err != nil {
		return nil, err
	}
	rank := NumericalRank(s, defaultTol(r, c))
	if rank == 0 {
		return nil, nil
	}
	return firstCols(u, rank), nil
}

// PrincipalAngles returns the principal angles (radians, ascending, in
// [0, π/2]) between the column spans of a and b, which must have the same
// number of rows; there are min(rank a, rank b) of them.
//
// Both spans are orthonormalised (Orth). Cosines come from the SVD of QaᵀQb,
// but arccos loses half the digits near 0 (an angle of 1e-9 has cosine
// 1 − 5e-19 = 1 in float64), so angles below π/4 are taken from the sines
// instead, the singular values of (I − QaQaᵀ)Qb (Knyazev & Argentati 2002).
// A zero matrix has no span and gives an error wrapping ErrRankDeficient.
func PrincipalAngles(a, b mat.Matrix) ([]float64, error) {
	da, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w", err)
	}
	db, err := view("b", b)
	if err != nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w", err)
	}
	ra, _ := da.Dims()
	rb, _ := db.Dims()
	if ra != rb {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w: a has %d rows, b has %d", ErrShape, ra, rb)
	}
	qa, err := orth(da)
	if err != nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w", err)
	}
	qb, err := orth(db)
	if err != nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w", err)
	}
	if qa == nil || qb == nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w: a or b is the zero matrix", ErrRankDeficient)
	}
	_, p := qa.Dims()
	_, q := qb.Dims()
	if q > p { // angles are symmetric; keep Qb the narrower one so the sine matrix has exactly q values
		qa, qb, p, q = qb, qa, q, p
	}
	var m mat.Dense
	m.Mul(qa.T(), qb) // p×q
	_, cosv, _, err := thinSVD(&m, false)
	if err != nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w", err)
	}
	var res mat.Dense
	res.Mul(qa, &m)
	res.Sub(qb, &res) // (I − QaQaᵀ)Qb, n×q
	_, sinv, _, err := thinSVD(&res, false)
	if err != nil {
		return nil, fmt.Errorf("linalg.PrincipalAngles: %w", err)
	}
	angles := make([]float64, q)
	for i := 0; i < q; i++ {
		cs := math.Min(cosv[i], 1) // i-th largest cosine ↔ i-th smallest angle
		sn := math.Min(sinv[q-1-i], 1)
		if cs*cs >= 0.5 {
			angles[i] = math.Asin(sn)
		} else {
			angles[i] = math.Acos(cs)
		}
	}
	// The two formulas are each monotone but meet at π/4 with rounding-level
	// mismatch; keep the promised ascending order exactly.
	for i := 1; i < q; i++ {
		if angles[i] < angles[i-1] {
			angles[i] = angles[i-1]
		}
	}
	return angles, nil
}

// Procrustes returns the orthogonal c×c matrix Q minimising ‖a·Q − b‖_F for
// r×c matrices a and b (the orthogonal Procrustes problem, Schönemann 1966):
// Q = U·Vᵀ from the SVD aᵀb = U·Σ·Vᵀ. It is how two bases of the same
// subspace, or two estimates of the same rows up to rotation, are aligned.
func Procrustes(a, b mat.Matrix) (*mat.Dense, error) {
	da, err := view("a", a)
	if err != nil {
		return nil, fmt.Errorf("linalg.Procrustes: %w", err)
	}
	db, err := view("b", b)
	if err != nil {
		return nil, fmt.Errorf("linalg.Procrustes: %w", err)
	}
	ra, ca := da.Dims()
	rb, cb := db.Dims()
	if ra != rb || ca != cb {
		return nil, fmt.Errorf("linalg.Procrustes: %w: a is %d×%d, b is %d×%d", ErrShape, ra, ca, rb, cb)
	}
	var m mat.Dense
	m.Mul(da.T(), db)
	u, _, v, err := thinSVD(&m, true)
	if err != nil {
		return nil, fmt.Errorf("linalg.Procrustes: %w", err)
	}
	var q mat.Dense
	q.Mul(u, v.T())
	return &q, nil
}
