package twolayer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// Polish tolerances (specs/001 §3.3).
const (
	// nullTol: a system counts as feasible when σ_k/σ_1 of the confident-zero
	// rows of the basis is below it (noiseless data give ~1e-15).
	nullTol = 1e-9
	// uniqueTol: the null space is one-dimensional when σ_{k−1}/σ_1 exceeds it.
	uniqueTol = 1e-6
	// unitTol: a polished unit is exact when ‖ReLU(X·z) − r‖/‖r‖ is below it
	// over all samples, r being the unit's activation read off the column
	// span of Y.
	unitTol = 1e-8
)

// UnitPolish reports what the exact polish did for one hidden unit.
type UnitPolish struct {
	// OK reports that the unit was made exact and passed its own residual check.
	OK bool `json:"ok"`
	// Sign is +1 if the start's row had the right sign, −1 if it was flipped.
	Sign int `json:"sign"`
	// Zeros is the number of confidently inactive samples used.
	Zeros int `json:"zeros"`
	// Angle is the angle (radians) between the start's row and the exact row.
	Angle float64 `json:"angle"`
	// Residual is ‖ReLU(X·vᵀ)·s − r‖/‖r‖ over all samples.
	Residual float64 `json:"residual"`
	// Why explains a failure.
	Why string `json:"why,omitempty"`
}

// ExactPolish turns approximate rows ±V̂ into the exact rows of V* — Bakshi et
// al. Alg 5 in the margin form of specs/001 §2.6. For each unit i and each
// sign q, the samples where q·v̂_i·x is most negative relative to ‖x‖ are
// confidently inactive for the true row (if v̂ is within angle ε of q·v*_i,
// every sample with q·v̂·x/‖x‖ < −ε is). The unit's activation f(X·v*_i) is the
// only vector of the column span of Y (basis B, n×k) that vanishes there, so
// it is the null vector w of those rows of B: r = B·w. The zeros are taken in
// order of confidence and their number doubled until the null space is
// one-dimensional; a wrong sign or a too-inaccurate start leaves no null
// vector. Finally v*_i solves the consistent system x_q·z = r_q on the active
// samples, and the unit is accepted only if ReLU(X·z) reproduces r on all n
// samples to 1e-8 — a certificate per unit.
//
// Deviation from the paper: Alg 5 uses a fixed threshold τ = 1/poly(ℓ) on the
// first ℓ samples; the threshold here adapts to the start's accuracy (the
// most confident samples first) and every imposed equation is exactly true as
// long as the start is within the margin, so the result does not depend on
// how accurate the start was (specs/001 §6 claim 2).
//
// It returns V with unit rows (rows of failed units are the start's rows) and
// a report per unit.
func ExactPolish(ctx context.Context, X, B, Vhat *mat.Dense, progress func(done, total int)) (*mat.Dense, []UnitPolish, error) {
	n, d := X.Dims()
	k, dv := Vhat.Dims()
	if nb, kb := B.Dims(); nb != n || kb != k || dv != d {
		return nil, nil, fmt.Errorf("%w: polish shapes: X %d×%d, basis %d×%d, V %d×%d", ErrInput, n, d, nb, kb, k, dv)
	}
	xnorm := make([]float64, n)
	for q := 0; q < n; q++ {
		xnorm[q] = math.Max(mat.Norm(X.RowView(q), 2), math.SmallestNonzeroFloat64)
	}
	V := mat.DenseCopyOf(Vhat)
	reports := make([]UnitPolish, k)
	cosines := make([]float64, n)
	order := make([]int, n)
	for i := 0; i < k; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		vh := Vhat.RawRowView(i)
		for q := 0; q < n; q++ {
			cosines[q] = dot(X.RawRowView(q), vh) / xnorm[q]
		}
		var found []struct {
			z   []float64
			rep UnitPolish
		}
		var whys []string
		for _, sign := range []int{1, -1} {
			// Confident zeros of ReLU(sign·v̂·x): the most negative sign·cosines.
			zeros := func(t int) []int {
				return smallest(cosines, float64(sign), t, order)
			}
			z, rep, why := polishUnit(X, B, xnorm, vh, sign, zeros)
			if rep.OK {
				if j, sj := nearestRow(Vhat, z); j != i || sj != sign {
					rep.OK = false
					why = fmt.Sprintf("the exact row found is nearest to start row %d with sign %+d: it belongs to another unit", j, sj)
				}
			}
			if rep.OK {
				found = append(found, struct {
					z   []float64
					rep UnitPolish
				}{z, rep})
			} else {
				whys = append(whys, fmt.Sprintf("sign %+d: %s", sign, why))
			}
		}
		switch len(found) {
		case 1:
			V.SetRow(i, found[0].z)
			reports[i] = found[0].rep
		case 2:
			// Both signs certified is impossible for a generic instance
			// (Lemma 10); report rather than guess.
			reports[i] = UnitPolish{Why: "both signs gave a certified row: the instance is degenerate"}
		default:
			reports[i] = UnitPolish{Why: fmt.Sprint(whys)}
		}
		if progress != nil {
			progress(i+1, k)
		}
	}
	return V, reports, nil
}

// polishUnit runs the polish for one unit and one sign. zeros(t) returns the
// t most confident inactive samples.
func polishUnit(X, B *mat.Dense, xnorm, vh []float64, sign int, zeros func(t int) []int) ([]float64, UnitPolish, string) {
	n, d := X.Dims()
	_, k := B.Dims()
	rep := UnitPolish{Sign: sign}
	var w []float64
	for t := max(3*k, 30); ; t *= 2 {
		if t > n/4 {
			return nil, rep, fmt.Sprintf("the null space stayed %d-dimensional up to %d confident zeros", 2, n/4)
		}
		idx := zeros(t)
		Bn := mat.NewDense(t, k, nil)
		for j, q := range idx {
			Bn.SetRow(j, B.RawRowView(q))
		}
		_, s, vs, err := linalg.ThinSVD(Bn)
		if err != nil {
			return nil, rep, err.Error()
		}
		if s[0] == 0 {
			continue
		}
		if s[k-1] > nullTol*s[0] {
			return nil, rep, fmt.Sprintf("no activation of the output span vanishes on the %d most confident zeros (σ_k/σ_1 = %.1e): wrong sign, noise, or a start too far from the truth", t, s[k-1]/s[0])
		}
		if k == 1 || s[k-2] > uniqueTol*s[0] {
			w = mat.Col(nil, k-1, vs)
			rep.Zeros = t
			break
		}
	}
	r := make([]float64, n)
	rmax, pos := 0.0, 0.0
	for q := 0; q < n; q++ {
		r[q] = dot(B.RawRowView(q), w)
		if math.Abs(r[q]) > rmax {
			rmax = math.Abs(r[q])
		}
		pos += r[q]
	}
	if pos < 0 { // an activation is non-negative: fix the null vector's sign
		for q := range r {
			r[q] = -r[q]
		}
	}
	// Active samples, taken in index order until the system is comfortably
	// overdetermined; entries within 1e-7·max of zero are left out so that
	// no inactive sample is imposed as active.
	need := max(5*d, 200)
	var rows []int
	for q := 0; q < n && len(rows) < need; q++ {
		if r[q] > 1e-7*rmax {
			rows = append(rows, q)
		}
	}
	if len(rows) < d {
		return nil, rep, fmt.Sprintf("only %d active samples, need ≥ d = %d", len(rows), d)
	}
	A := mat.NewDense(len(rows), d, nil)
	rhs := mat.NewDense(len(rows), 1, nil)
	for j, q := range rows {
		A.SetRow(j, X.RawRowView(q))
		rhs.Set(j, 0, r[q])
	}
	sol, err := linalg.LstSq(A, rhs)
	if err != nil {
		return nil, rep, "active samples do not determine the row: " + err.Error()
	}
	z := mat.Col(nil, 0, sol)
	// Certificate: ReLU(X·z) must reproduce r on every sample.
	num, den := 0.0, 0.0
	for q := 0; q < n; q++ {
		e := math.Max(dot(X.RawRowView(q), z), 0) - r[q]
		num += e * e
		den += r[q] * r[q]
	}
	rep.Residual = math.Sqrt(num / den)
	if rep.Residual > unitTol {
		return nil, rep, fmt.Sprintf("ReLU(X·z) misses the activation by %.1e relative", rep.Residual)
	}
	zn := math.Sqrt(dot(z, z))
	for j := range z {
		z[j] /= zn
	}
	c := float64(sign) * dot(z, vh)
	rep.Angle = math.Acos(math.Max(-1, math.Min(1, c)))
	if c <= 0 {
		return nil, rep, fmt.Sprintf("the exact row found is %.0f° from the start: it belongs to another unit", rep.Angle*180/math.Pi)
	}
	rep.OK = true
	return z, rep, ""
}

// nearestRow returns the row j and sign of the ±V̂ row closest in angle to z.
func nearestRow(Vhat *mat.Dense, z []float64) (int, int) {
	k, _ := Vhat.Dims()
	best, bestJ, bestS := -1.0, 0, 1
	for j := 0; j < k; j++ {
		c := dot(Vhat.RawRowView(j), z)
		if math.Abs(c) > best {
			best, bestJ, bestS = math.Abs(c), j, 1
			if c < 0 {
				bestS = -1
			}
		}
	}
	return bestJ, bestS
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// smallest returns the indices of the t smallest values of sign·vals, most
// negative first. It partitions by quickselect (expected O(n)) and sorts only
// the t selected, so the polish never sorts all n samples. scratch has
// length len(vals) and is overwritten.
func smallest(vals []float64, sign float64, t int, scratch []int) []int {
	for i := range scratch {
		scratch[i] = i
	}
	key := func(i int) float64 { return sign * vals[scratch[i]] }
	lo, hi := 0, len(scratch)-1
	for lo < hi {
		// Median-of-three pivot: deterministic, and robust to sorted input.
		mid := lo + (hi-lo)/2
		a, b, c := key(lo), key(mid), key(hi)
		pivot := max(min(a, b), min(max(a, b), c))
		i, j := lo, hi
		for i <= j {
			for key(i) < pivot {
				i++
			}
			for key(j) > pivot {
				j--
			}
			if i <= j {
				scratch[i], scratch[j] = scratch[j], scratch[i]
				i++
				j--
			}
		}
		switch {
		case t-1 <= j:
			hi = j
		case t-1 >= i:
			lo = i
		default:
			lo = hi
		}
	}
	out := append([]int(nil), scratch[:t]...)
	slices.SortFunc(out, func(a, b int) int { return cmpFloat(sign*vals[a], sign*vals[b]) })
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
