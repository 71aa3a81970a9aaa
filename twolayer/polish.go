package twolayer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// Polish tolerances (practical default, not in [BJW19]).
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
// al. Alg 5 in the margin form of [BJW19, Alg 5]. For each unit i and each
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
// how accurate the start was (the margin argument of [BJW19, Thm 6]).
//
// It returns V with unit rows (rows of failed units are the start's rows) and
// a report per unit.
//
// For a rectified activation φ (Bakshi et al.
// [BJW19, App. 9.1]): the zero-pattern step is unchanged, and the
// final linear system inverts φ on the active samples. For φ = max(x,0)^c
// it solves X_P·z = r_P^{1/c} (the unknown positive scale of r passes
// through φ⁻¹) and returns a unit row; for φ = e^{max(x,0)} − 1 it first
// resolves the scale s of r = s·φ(X·v*) (expScale) and returns v* with its
// norm. The per-unit certificate checks s·φ(X·z) against r on all samples.
// Active samples are those with r > 1e-4·max r for φ ≠ ReLU (1e-7 for the
// ReLU): below that, inverting a power amplifies the rounding of r. For
// φ ≠ ReLU a certified row is recomputed once from all the samples it puts
// clearly inactive (repolish): heavy-tailed φ makes the first few confident
// zeros too ill-conditioned for a 1e-10 certificate (x³: 1e-9 → 1e-13).
// Rows are unit except for e^x − 1, whose rows carry their norms.
// act "" means nn.ReLU. X must be n×d, B n×k and Vhat k×d, all finite;
// other shapes (or nil) give an error wrapping ErrInput that says what was
// expected.
func ExactPolish(ctx context.Context, X, B, Vhat *mat.Dense, act nn.Activation, progress func(done, total int)) (*mat.Dense, []UnitPolish, error) {
	if act == "" {
		act = nn.ReLU
	}
	if err := checkActivation(act); err != nil {
		return nil, nil, err
	}
	const fn = "twolayer.ExactPolish"
	n, d, err := certify.CheckMatrix(fn, "X", X, -1, -1, "n×d, one row per sample")
	if err != nil {
		return nil, nil, err
	}
	k, _, err := certify.CheckMatrix(fn, "Vhat", Vhat, -1, d, fmt.Sprintf("k×d with d = %d (X's columns)", d))
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := certify.CheckMatrix(fn, "B", B, n, k, fmt.Sprintf("n×k with n = %d (X's rows) and k = %d (Vhat's rows)", n, k)); err != nil {
		return nil, nil, err
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
			z, rep, why := polishUnit(X, B, xnorm, vh, sign, zeros, act)
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
func polishUnit(X, B *mat.Dense, xnorm, vh []float64, sign int, zeros func(t int) []int, act nn.Activation) ([]float64, UnitPolish, string) {
	n, _ := X.Dims()
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
	z, _, resid, why := rowFromNull(X, B, w, act)
	rep.Residual = resid
	if why != "" {
		return nil, rep, why
	}
	if act != nn.ReLU {
		// Second pass with the exact zero pattern: the few most confident
		// zeros of the start give a null vector good to ~1e-10 relative
		// when φ's heavy tail (x³, e^x) makes their rows of B ill
		// conditioned; every sample the exact row puts clearly below 0 gives
		// one good to rounding. (Kept off for the ReLU, whose first pass is
		// already exact to rounding.)
		if z2, _, r2, ok := repolish(X, B, xnorm, z, act); ok && r2 < resid {
			z, rep.Residual = z2, r2
		}
	}
	zn := math.Sqrt(dot(z, z))
	if act != nn.RectExp { // homogeneous φ: the row's scale is a symmetry
		for j := range z {
			z[j] /= zn
		}
		zn = 1
	}
	c := float64(sign) * dot(z, vh) / zn
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

// rowFromNull turns a null vector w of the confident-zero rows of B into
// the unit's row: r = B·w (sign fixed to be non-negative) is the unit's
// activation up to a positive scale; the row z solves φ⁻¹ on the active
// samples, and the certificate is ‖scale·φ(X·z) − r‖/‖r‖ over all samples
// (why is non-empty when it exceeds unitTol or a step fails).
func rowFromNull(X, B *mat.Dense, w []float64, act nn.Activation) (z []float64, scale, resid float64, why string) {
	n, d := X.Dims()
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
	// overdetermined; entries within 1e-7·max of zero (1e-4 for φ ≠ ReLU,
	// see ExactPolish) are left out so that no inactive sample is
	// imposed as active.
	need := max(5*d, 200)
	thr := 1e-7
	if act != nn.ReLU {
		thr = 1e-4
	}
	var rows []int
	for q := 0; q < n && len(rows) < need; q++ {
		if r[q] > thr*rmax {
			rows = append(rows, q)
		}
	}
	if len(rows) < d {
		return nil, 1, math.Inf(1), fmt.Sprintf("only %d active samples, need ≥ d = %d", len(rows), d)
	}
	A := mat.NewDense(len(rows), d, nil)
	rhs := mat.NewDense(len(rows), 1, nil)
	for j, q := range rows {
		A.SetRow(j, X.RawRowView(q))
		rhs.Set(j, 0, r[q])
	}
	scale = 1.0 // r ≈ scale·φ(X·z)
	if act == nn.RectExp {
		a, zz, rel, err := expScale(A, mat.Col(nil, 0, rhs))
		if err != nil {
			return nil, 1, math.Inf(1), "resolving the unit's output scale: " + err.Error()
		}
		if rel > unitTol {
			return nil, 1, math.Inf(1), fmt.Sprintf("no output scale s makes log(1 + r/s) linear in x on the active samples (relative residual %.1e): not an e^x − 1 unit, or noise", rel)
		}
		z, scale = zz, 1/a
	} else {
		if act != nn.ReLU {
			inv := act.Inverse()
			raw := rhs.RawMatrix().Data
			for j, v := range raw {
				raw[j] = inv(v)
			}
		}
		sol, err := linalg.LstSq(A, rhs)
		if err != nil {
			return nil, 1, math.Inf(1), "active samples do not determine the row: " + err.Error()
		}
		z = mat.Col(nil, 0, sol)
	}
	// Certificate: scale·φ(X·z) must reproduce r on every sample.
	f := act.Func()
	num, den := 0.0, 0.0
	for q := 0; q < n; q++ {
		var e float64
		if act == nn.ReLU {
			e = math.Max(dot(X.RawRowView(q), z), 0) - r[q]
		} else {
			e = scale*f(dot(X.RawRowView(q), z)) - r[q]
		}
		num += e * e
		den += r[q] * r[q]
	}
	resid = math.Sqrt(num / den)
	if !(resid <= unitTol) {
		return nil, 1, resid, fmt.Sprintf("%s(X·z) misses the activation by %.1e relative", act, resid)
	}
	return z, scale, resid, ""
}

// repolish recomputes a unit's row from the null vector of all samples
// that the certified row z puts clearly inactive (x·z < −1e-3·‖x‖·‖z‖; at
// most repolishRows of them, in index order). ok is false when the system
// is not clearly rank-deficient or the row fails its certificate.
func repolish(X, B *mat.Dense, xnorm, z []float64, act nn.Activation) (z2 []float64, scale, resid float64, ok bool) {
	n, _ := X.Dims()
	_, k := B.Dims()
	zn := math.Sqrt(dot(z, z))
	var idx []int
	for q := 0; q < n && len(idx) < repolishRows; q++ {
		if dot(X.RawRowView(q), z) < -1e-3*xnorm[q]*zn {
			idx = append(idx, q)
		}
	}
	if len(idx) < 4*k {
		return nil, 0, 0, false
	}
	Bn := mat.NewDense(len(idx), k, nil)
	for j, q := range idx {
		Bn.SetRow(j, B.RawRowView(q))
	}
	_, s, vs, err := linalg.ThinSVD(Bn)
	if err != nil || s[0] == 0 || s[k-1] > nullTol*s[0] {
		return nil, 0, 0, false
	}
	z2, scale, resid, why := rowFromNull(X, B, mat.Col(nil, k-1, vs), act)
	return z2, scale, resid, why == ""
}

// repolishRows caps the rows of the second polish pass: 20 000 inactive
// samples pin a k-dimensional null vector to rounding at a cost of
// 20 000·k² flops.
const repolishRows = 20000
