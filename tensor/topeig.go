package tensor

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/vec"
)

// topEigen returns the largest eigenvalue of the symmetric k×k matrix Q and
// a unit eigenvector for it, the one eigenpair an AC–DC column update needs:
// Q is reduced to tridiagonal form T = Hᵀ·Q·H (LAPACK's Dsytrd), the largest
// eigenvalue of T is found by bisection on Sturm counts to a few ulps of
// ‖T‖, its eigenvector by inverse iteration on T − λI (tridiagonal LU with
// partial pivoting), and mapped back by H — LAPACK's dsyevx route for one
// eigenpair. It costs a few k³ flops where the full eigendecomposition
// (mat.EigenSym) costs several times that. ws is scratch reused across
// calls. ok is false for a non-finite Q.
func topEigen(Q *mat.SymDense, ws *eigWork) (float64, []float64, bool) {
	k := Q.SymmetricDim()
	if k == 1 {
		return Q.At(0, 0), []float64{1}, !math.IsNaN(Q.At(0, 0)) && !math.IsInf(Q.At(0, 0), 0)
	}
	ws.grow(k)
	raw := Q.RawSymmetric()
	a := ws.a[:k*k]
	for i := 0; i < k; i++ {
		row := raw.Data[i*raw.Stride+i : i*raw.Stride+k]
		if !kern.Finite(row) {
			return 0, nil, false
		}
		copy(a[i*k+i:(i+1)*k], row)
	}
	d, e, tau := ws.d[:k], ws.e[:k-1], ws.tau[:k-1]
	var impl gonum.Implementation
	impl.Dsytrd(blas.Upper, k, a, k, d, e, tau, ws.work, len(ws.work))

	lam, norm := largestTridiagEigenvalue(d, e)
	if norm == 0 {
		v := make([]float64, k)
		v[k-1] = 1
		return 0, v, true
	}
	ws.factorShifted(d, e, lam, norm)
	y, ok := ws.inverseIterate(k)
	if !ok {
		return 0, nil, false
	}
	// Back to Q's coordinates: v = H·y.
	impl.Dorgtr(blas.Upper, k, a, k, tau, ws.work, len(ws.work))
	v := make([]float64, k)
	for i := 0; i < k; i++ {
		s := 0.0
		for j := 0; j < k; j++ {
			s += a[i*k+j] * y[j]
		}
		v[i] = s
	}
	vec.Normalize(v)
	return lam, v, true
}

// largestTridiagEigenvalue returns the largest eigenvalue of the symmetric
// tridiagonal T (diagonal d, off-diagonal e) by bisection between
// Gershgorin bounds to a few ulps of norm, the larger Gershgorin bound in
// magnitude; count(x) is the number of eigenvalues below x (negative pivots
// of T − xI, LAPACK's dstebz). norm 0 means T = 0 (lam is then 0).
func largestTridiagEigenvalue(d, e []float64) (lam, norm float64) {
	k := len(d)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := 0; i < k; i++ {
		r := 0.0
		if i > 0 {
			r += math.Abs(e[i-1])
		}
		if i < k-1 {
			r += math.Abs(e[i])
		}
		lo, hi = math.Min(lo, d[i]-r), math.Max(hi, d[i]+r)
	}
	norm = math.Max(math.Abs(lo), math.Abs(hi))
	if norm == 0 {
		return 0, 0
	}
	pivmin := math.SmallestNonzeroFloat64 / 0x1p-52 * norm
	count := func(x float64) int {
		c := 0
		q := d[0] - x
		for i := 0; ; i++ {
			if math.Abs(q) < pivmin {
				q = -pivmin
			}
			if q < 0 {
				c++
			}
			if i == k-1 {
				return c
			}
			q = d[i+1] - x - e[i]*e[i]/q
		}
	}
	for it := 0; it < 200 && hi-lo > 4*0x1p-52*norm; it++ {
		mid := lo + (hi-lo)/2
		if count(mid) >= k {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo + (hi-lo)/2, norm
}

// factorShifted factors T − λI (T tridiagonal with diagonal d, off-diagonal
// e) by LU with partial pivoting into ws.dl (multipliers), ws.dm, ws.du and
// ws.du2 (U's diagonal and two superdiagonals, the second from the row
// swaps), ws.swap (the swaps) — LAPACK's dgttrf, for inverseIterate. A zero
// pivot is replaced by ulp·norm.
func (ws *eigWork) factorShifted(d, e []float64, lam, norm float64) {
	k := len(d)
	dl, dm, du, du2 := ws.dl[:k], ws.dm[:k], ws.du[:k], ws.du2[:k]
	swap := ws.swap[:k]
	for i := 0; i < k; i++ {
		dm[i] = d[i] - lam
		if i < k-1 {
			du[i], dl[i] = e[i], e[i]
		}
	}
	tiny := 0x1p-52 * norm
	for i := 0; i < k-1; i++ {
		du2[i] = 0
		if math.Abs(dm[i]) >= math.Abs(dl[i]) {
			swap[i] = false
			if dm[i] == 0 {
				dm[i] = tiny
			}
			f := dl[i] / dm[i]
			dl[i] = f
			dm[i+1] -= f * du[i]
		} else {
			swap[i] = true
			f := dm[i] / dl[i]
			dm[i] = dl[i]
			dl[i] = f
			t := du[i]
			du[i] = dm[i+1]
			dm[i+1] = t - f*du[i]
			if i < k-2 {
				du2[i] = du[i+1]
				du[i+1] = -f * du[i+1]
			}
		}
	}
	if dm[k-1] == 0 {
		dm[k-1] = tiny
	}
}

// inverseIterate solves (T − λI)·y = b with factorShifted's LU, three
// steps from b = 1, scaling y to max-norm 1 after each, so y converges to
// the eigenvector of the eigenvalue nearest λ. ok is false when y vanishes
// or overflows.
func (ws *eigWork) inverseIterate(k int) (y []float64, ok bool) {
	dl, dm, du, du2 := ws.dl[:k], ws.dm[:k], ws.du[:k], ws.du2[:k]
	swap := ws.swap[:k]
	y = ws.y[:k]
	for i := range y {
		y[i] = 1
	}
	for step := 0; step < 3; step++ {
		// Forward: apply the row swaps and multipliers.
		for i := 0; i < k-1; i++ {
			if swap[i] {
				y[i], y[i+1] = y[i+1], y[i]-dl[i]*y[i+1]
			} else {
				y[i+1] -= dl[i] * y[i]
			}
		}
		// Back substitution with U (diagonal dm, superdiagonals du, du2).
		for i := k - 1; i >= 0; i-- {
			s := y[i]
			if i < k-1 {
				s -= du[i] * y[i+1]
			}
			if i < k-2 {
				s -= du2[i] * y[i+2]
			}
			y[i] = s / dm[i]
		}
		s := 0.0
		for _, v := range y {
			s = math.Max(s, math.Abs(v))
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return nil, false
		}
		for i := range y {
			y[i] /= s
		}
	}
	return y, true
}

// eigWork is topEigen's scratch.
type eigWork struct {
	a, d, e, tau, work, dl, dm, du, du2, y []float64
	swap                                   []bool
}

func (w *eigWork) grow(k int) {
	if len(w.a) >= k*k && len(w.d) >= k {
		return
	}
	w.a = make([]float64, k*k)
	w.d, w.e, w.tau = make([]float64, k), make([]float64, k), make([]float64, k)
	w.dl, w.dm, w.du, w.du2, w.y = make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k), make([]float64, k)
	w.swap = make([]bool, k)
	w.work = make([]float64, 64*k)
}
