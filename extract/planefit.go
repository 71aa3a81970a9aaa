package extract

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"
)

// planeRadius is the distance from the kink at which refinePlane locates
// a unit's critical points: near enough that the hyperplane read from the
// Jacobian jump finds them in a narrow window (its normal's error moves
// them by ρ/√d of it), far enough that their positions' errors tilt the
// normal little. The whole-network polish restores the last digits.
const planeRadius = 1.0

// planeProbes is the number of points at which refinePlane first
// measures the common offset of the kinks from the hyperplane found.
const planeProbes = 16

// refinePlane sharpens a unit's hyperplane read from a Jacobian jump
// behind a coarse oracle, where the jump's finite differences leave the
// normal off by 1e-3 or so — too coarse for the hyperplane test to tell
// the unit's kinks from its neighbours' and for the frames of the layers
// after it. After Carlini, Jagielski, Mironov (CRYPTO 2020), who locate a
// neuron's critical points to refine it, it locates the unit's kink on the normal
// line through points y_k = x* + ρ·g_k of the hyperplane found (x* the
// kink it was read at, g_k random unit directions in the hyperplane): six
// queries at y_k + τ·ε·ŵ, τ ∈ {±1, ±2, ±3}, two straight sides whose
// lines meet at the kink, to a precision set by the rounding over the
// slope change, not by a finite difference over d coordinates. The
// hyperplane through the kinks located (2d points, least squares,
// the points where another kink bends a side left out) replaces u's when
// enough points are found; est and estW are set from the fit's residual.
// It returns false when too few are found (a later layer's surface, flat
// only near x*, or a unit its later layers ignore there). x is moved with
// the hyperplane (by the offset the probes measure).
func (e *extractor) refinePlane(ctx context.Context, u *unit, x []float64, shiftErr, rho float64) (bool, error) {
	d := e.d
	K := 2*d + 8
	sigma := math.Sqrt(float64(d))
	straight, bentBy := e.planeTols()
	step := math.Max(1e-4*sigma, e.planeStep(*u, bentBy*straight))
	G := mat.NewDense(K, d, nil)
	for k := 0; k < K; k++ {
		g := G.RawRowView(k)
		for j := range g {
			g[j] = e.rng.NormFloat64()
		}
		projectOut(g, [][]float64{u.w})
		n := math.Sqrt(dotf(g, g))
		for j := range g {
			g[j] /= n
		}
	}
	// The kink at y_k = x* + ρ·g_k is off the hyperplane found by the
	// error of x*'s position (shiftErr: the hyperplane found passes
	// through x*), common to all points, plus that of the normal along
	// g_k (about u.estW·ρ/√d). A few probes with a window wide enough
	// for both measure the common part; the rest are located in a window
	// for the second only.
	probe := G.Slice(0, planeProbes, 0, d).(*mat.Dense)
	delta, use, _, err := e.locateKinks(ctx, u, x, probe, rho, math.Max(step, 8*(shiftErr+u.estW*rho/sigma)))
	if err != nil {
		return false, err
	}
	var shifts []float64
	for k, ok := range use {
		if ok {
			shifts = append(shifts, delta[k])
		}
	}
	if len(shifts) < planeProbes/2 {
		return false, nil
	}
	shift := median(shifts)
	for j := range x {
		x[j] += shift * u.w[j]
	}
	u.b -= shift
	eps := math.Max(step, 8*u.estW*rho/sigma)
	delta, use, found, err := e.locateKinks(ctx, u, x, G, rho, eps)
	if err != nil {
		return false, err
	}
	if found < d+d/8 {
		return false, nil
	}
	// ρ·c·g_k + β = −δ_k over the points used, and c·ŵ = 0: the normal's
	// correction c (in the hyperplane) and the offset's β.
	fit := func() ([]float64, float64, bool) {
		n := 0
		for _, ok := range use {
			if ok {
				n++
			}
		}
		A := mat.NewDense(n+1, d+1, nil)
		rhs := mat.NewVecDense(n+1, nil)
		r := 0
		for k := 0; k < K; k++ {
			if !use[k] {
				continue
			}
			row := A.RawRowView(r)
			for j, v := range G.RawRowView(k) {
				row[j] = rho * v
			}
			row[d] = 1
			rhs.SetVec(r, -delta[k])
			r++
		}
		copy(A.RawRowView(n), u.w)
		var sol mat.VecDense
		if err := sol.SolveVec(A, rhs); err != nil {
			return nil, 0, false
		}
		// The residual of n equations in d + 1 unknowns, scaled to the
		// points' own error.
		return sol.RawVector().Data, rmsResidual(A, &sol, rhs, n) * math.Sqrt(float64(n)/float64(n-d-1)), true
	}
	sol, res, ok := fit()
	// Points where another kink within ε moved the meeting point: their
	// residuals stand out of the rest's (4 times the median's normal
	// scale, the residuals shrunk by the fit's leverage undone), left out
	// and the fit redone, up to three times.
	used := found
	for round := 0; ok && round < 3; round++ {
		r := make([]float64, K)
		var rs []float64
		for k := 0; k < K; k++ {
			if use[k] {
				r[k] = math.Abs(rho*dotf(G.RawRowView(k), sol[:d]) + sol[d] + delta[k])
				rs = append(rs, r[k])
			}
		}
		lim := 4 * 1.4826 * median(rs) * math.Sqrt(float64(used)/float64(used-d-1))
		dropped := 0
		for k := 0; k < K; k++ {
			if use[k] && r[k] > lim {
				use[k] = false
				dropped++
			}
		}
		if dropped == 0 {
			break
		}
		if used -= dropped; used < d+d/8 {
			return false, nil
		}
		sol, res, ok = fit()
	}
	if !ok {
		return false, nil
	}
	// The new hyperplane (ŵ + c)·z + b' = 0 through the kinks, with
	// b' = b + β − c·x*, scaled to a unit normal.
	c := sol[:d]
	w := make([]float64, d)
	for j := range w {
		w[j] = u.w[j] + c[j]
	}
	b := u.b + sol[d] - dotf(c, x)
	nw := math.Sqrt(dotf(w, w))
	for j := range w {
		w[j] /= nw
	}
	// The fit's error: ‖δc‖ ≈ res·d/(ρ·√n) (the directions g_k spread
	// over d−1 dimensions), and β's res/√n.
	n := float64(used)
	estW := res * float64(d) / (rho * math.Sqrt(n))
	*u = newUnitRec(w, b/nw, u.a, 0, x)
	u.estW = estW
	u.est = estW*math.Max(1, math.Sqrt(dotf(x, x)/float64(d))) + res/math.Sqrt(n)
	return true, nil
}

// rmsResidual is the root mean square of A·x − b over A's first n rows.
func rmsResidual(A *mat.Dense, x, b *mat.VecDense, n int) float64 {
	var r mat.VecDense
	r.MulVec(A, x)
	r.SubVec(&r, b)
	s := 0.0
	for i := 0; i < n; i++ {
		s += r.AtVec(i) * r.AtVec(i)
	}
	return math.Sqrt(s / float64(n))
}

// locateKinks finds unit u's kink on the normal line through each point
// y_k = x + ρ·g_k (g_k the rows of G, in u's hyperplane): six queries at
// y_k + τ·ε·ŵ, τ ∈ {±1, ±2, ±3}; where both sides are straight (second
// differences within the rounding's tolerance) and their slopes differ,
// the lines meet at the kink, δ_k from y_k (use[k]; found counts them).
// Points within 4ε of a known hyperplane or a wall are not used: they
// would see that kink too.
func (e *extractor) locateKinks(ctx context.Context, u *unit, x []float64, G *mat.Dense, rho, eps float64) (delta []float64, use []bool, found int, err error) {
	K, d := G.Dims()
	taus := []float64{-3, -2, -1, 1, 2, 3}
	nTau := len(taus)
	X := mat.NewDense(K*nTau, d, nil)
	use = make([]bool, K)
	y := make([]float64, d)
	for k := 0; k < K; k++ {
		g := G.RawRowView(k)
		for j := range y {
			y[j] = x[j] + rho*g[j]
		}
		use[k] = e.distanceAlong(y, u.w) > 4*eps
		for t, tau := range taus {
			row := X.RawRowView(k*nTau + t)
			for j := range row {
				row[j] = y[j] + tau*eps*u.w[j]
			}
		}
	}
	Y, err := e.o.query(ctx, X)
	if err != nil {
		return nil, nil, 0, err
	}
	e.diag.QueriesPlane += K * nTau
	straight, bentBy := e.planeTols()
	p := e.o.p
	// The rounding of an output near zero is that of the sums it came
	// from: the line's scale (median |f|) floors each output's.
	floor := make([]float64, p)
	if len(e.lines) > 0 {
		floor = e.lines[len(e.lines)-1].scale
	}
	delta = make([]float64, K)
	for k := 0; k < K; k++ {
		if !use[k] {
			continue
		}
		f := func(t, o int) float64 { return Y.At(k*nTau+t, o) }
		flat, top := true, 0.0
		for o := 0; o < p; o++ {
			scale := floor[o]
			for t := 0; t < nTau; t++ {
				scale = math.Max(scale, math.Abs(f(t, o)))
			}
			tol := straight * (scale + 1e-300)
			if math.Abs(f(0, o)-2*f(1, o)+f(2, o)) > tol || math.Abs(f(3, o)-2*f(4, o)+f(5, o)) > tol {
				flat = false
				break
			}
			// ε times the slopes' difference, and where the sides'
			// lines meet.
			b2 := (f(5, o) - f(3, o) - f(2, o) + f(0, o)) / 2
			if math.Abs(b2) > bentBy*tol && math.Abs(b2)/tol > top {
				top = math.Abs(b2) / tol
				delta[k] = -(f(4, o) - f(1, o) - (f(5, o) - f(3, o) + f(2, o) - f(0, o))) / b2 * eps
			}
		}
		use[k] = flat && top > 0 && math.Abs(delta[k]) < eps
		if use[k] {
			found++
		}
	}
	return delta, use, found, nil
}
