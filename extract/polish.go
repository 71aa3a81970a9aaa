package extract

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"
)

// polishCandidates is the number of random points on a unit's hyperplane
// polish compares to find one far from every other hyperplane.
const polishCandidates = 128

// polishSlack is how far (in ‖Δŵ‖ and |Δb̂|) a clean re-measurement may
// lie from a unit's first reading, from an oracle that rounds coarsely,
// and still replace it: far below the distance between two units'
// hyperplanes, and above the first readings' errors seen in float32
// (up to 0.06).
const polishSlack = 0.1

// polishTries is how many times polish re-measures a unit whose
// measurement failed (a check that did not pass, a jump that was not one
// unit, or one that disagreed with the unit): each try picks a new point,
// and the units re-measured in between place the other hyperplanes better.
const polishTries = 3

// polish re-measures the units whose expected error exceeds tol, once all
// units are known. A unit's first measurement used steps limited by the
// kinks that happened to lie near it on its line; now the whole
// arrangement is known, so the Jacobians either side of unit i are
// measured at the point of its hyperplane (among random candidates, the
// projections of Gaussian points) farthest from every other hyperplane, in
// units of a coordinate step (min_k |z_k|/‖ŵ_k‖_∞), with the largest step
// that crosses none. b̂ is re-read from the same measurements: the affine
// pieces f(x±) + J±(x − x±) agree exactly on the hyperplane. A re-measured
// unit replaces the old one only if it agrees with it to within 100 times
// the old expected error (a crossing of an unknown unit would not), or,
// for a coarse oracle, to within polishSlack.
func (e *extractor) polish(ctx context.Context, tol float64) error {
	var idx []int
	for i, u := range e.units {
		if u.est > tol && !u.polished && u.tries < polishTries {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		e.dedupe()
		return nil
	}
	d, m := e.d, len(e.units)
	pp := &polishPoints{W: mat.NewDense(m, d, nil), bias: make([]float64, m), C: mat.NewDense(polishCandidates, d, nil)}
	for i, u := range e.units {
		pp.W.SetRow(i, u.w)
		pp.bias[i] = u.b
	}
	var plans []polishPlan
	var jobs []*jacJob
	for _, i := range idx {
		pl, ok := e.planPolish(pp, i)
		if !ok {
			continue // no other hyperplane bounds the step (or none is finite)
		}
		plans = append(plans, pl)
		jobs = append(jobs, pl.jp, pl.jm)
	}
	if err := e.measure(ctx, jobs); err != nil {
		return err
	}
	for _, pl := range plans {
		e.applyPolish(pl)
	}
	e.dedupe()
	return nil
}

// polishPoints holds polish's view of the known units (rows W, biases)
// and its scratch for the candidate points C and their pre-activations Z.
type polishPoints struct {
	W    *mat.Dense
	bias []float64
	C    *mat.Dense
	Z    mat.Dense
}

// polishPlan is the re-measurement of unit i: the point xs of its
// hyperplane, the offset δ along ŵ_i either side, and the two Jacobian
// jobs.
type polishPlan struct {
	i      int
	xs     []float64
	delta  float64
	jp, jm *jacJob
}

// planPolish chooses where to re-measure unit i: among polishCandidates
// projections of Gaussian points onto its hyperplane, the one and offset δ
// that leave the largest step h (in coordinate steps) crossing no other
// hyperplane. ok is false when no other hyperplane bounds the step, or
// none is finite.
func (e *extractor) planPolish(pp *polishPoints, i int) (polishPlan, bool) {
	d, m, C, bias := e.d, len(e.units), pp.C, pp.bias
	u := e.units[i]
	for r := 0; r < polishCandidates; r++ {
		row := C.RawRowView(r)
		if e.dom != nil {
			// Inside the domain: where the segment between two of its
			// points crosses the hyperplane (a projection would mostly
			// leave it), or the projection when no pair of a few does.
			if y, ok := e.crossing(u); ok {
				copy(row, y)
				continue
			}
			copy(row, e.dom.sample(e.rng))
		} else {
			for j := range row {
				row[j] = e.rng.NormFloat64()
			}
		}
		z := dotf(u.w, row) + u.b
		for j := range row {
			row[j] -= z * u.w[j]
		}
	}
	pp.Z.Mul(C, pp.W.T())
	// z_k(x* ± δŵ_i) = z_k(x*) ± δ·(ŵ_k·ŵ_i).
	cos := make([]float64, m)
	for k := range cos {
		cos[k] = dotf(e.units[k].w, u.w)
	}
	best, bestH, bestDelta := -1, 0.0, 0.0
	for r := 0; r < polishCandidates; r++ {
		zr := pp.Z.RawRowView(r)
		marg := math.Inf(1)
		for k := 0; k < m; k++ {
			if k != i {
				marg = math.Min(marg, math.Abs(zr[k]+bias[k])/e.units[k].winf)
			}
		}
		// The domain's walls bound the step like hyperplanes, except that
		// a candidate outside the domain has a negative margin.
		xr := C.RawRowView(r)
		for _, wl := range e.walls() {
			marg = math.Min(marg, (dotf(wl.w, xr)+wl.b)/wl.winf)
		}
		for _, f := range []float64{0.25, 0.5, 1} {
			delta := f * marg * u.winf
			h := delta / u.winf
			for k := 0; k < m; k++ {
				if k == i {
					continue
				}
				z := zr[k] + bias[k]
				h = math.Min(h, (math.Abs(z)-delta*math.Abs(cos[k]))/e.units[k].winf)
			}
			for _, wl := range e.walls() {
				h = math.Min(h, (dotf(wl.w, xr)+wl.b-delta*math.Abs(dotf(wl.w, u.w)))/wl.winf)
			}
			if h > bestH {
				best, bestH, bestDelta = r, h, delta
			}
		}
	}
	if best < 0 || math.IsInf(bestDelta, 0) || math.IsNaN(bestDelta) || math.IsInf(bestH, 0) {
		return polishPlan{}, false
	}
	if e.deep {
		// A later layer's kink, which no hyperplane here places, may lie
		// within the step: each try after a failed one takes a quarter
		// of the step before.
		shrink := math.Pow(0.25, float64(u.tries))
		bestDelta, bestH = bestDelta*shrink, bestH*shrink
	}
	xs := mat.Row(nil, best, C)
	xp := make([]float64, d)
	xm := make([]float64, d)
	for j := range xs {
		xp[j] = xs[j] + bestDelta*u.w[j]
		xm[j] = xs[j] - bestDelta*u.w[j]
	}
	h := bestH / 2
	return polishPlan{i: i, xs: xs, delta: bestDelta, jp: &jacJob{x: xp, h: h}, jm: &jacJob{x: xm, h: h}}, true
}

// applyPolish reads unit pl.i again from its two measured Jacobians and
// replaces the unit when the new reading agrees with the old one to
// within 100 times its expected error.
func (e *extractor) applyPolish(pl polishPlan) {
	u := &e.units[pl.i]
	u.tries++
	if !pl.jp.ok || !pl.jm.ok {
		return
	}
	var dJ mat.Dense
	dJ.Sub(pl.jp.J, pl.jm.J)
	w, a, r2, errEff, ok := unitFromJump(&dJ, u.w, pl.jp.errJ+pl.jm.errJ, e.screenMerged())
	if !ok {
		return
	}
	// b̂ from the agreement of the two affine pieces on the hyperplane:
	// r = f(x₊) + J₊·(x* − x₊) − f(x₋) − J₋·(x* − x₋) (x± = x* ± δ·ŵ_old,
	// as the oracle read them), ŵ·y = −â·r/‖â‖² for the hyperplane's
	// points x* + y.
	p := len(a)
	num, aa := 0.0, dotf(a, a)
	dp, dm := make([]float64, len(pl.xs)), make([]float64, len(pl.xs))
	for j := range pl.xs {
		dp[j], dm[j] = pl.xs[j]-pl.jp.x[j], pl.xs[j]-pl.jm.x[j]
	}
	for o := 0; o < p; o++ {
		r := pl.jp.f0[o] - pl.jm.f0[o] + dotf(pl.jp.J.RawRowView(o), dp) - dotf(pl.jm.J.RawRowView(o), dm)
		num += a[o] * r
	}
	b := -dotf(w, pl.xs) + num/aa
	dw := 0.0
	for j := range w {
		dw += (w[j] - u.w[j]) * (w[j] - u.w[j])
	}
	// A coarse oracle's first reading can be off by more than its
	// expected error (a kink of another unit hidden below the rounding in
	// a piece beside it adds a small part to the jump); a clean reading
	// (both checks passed, the jump rank one) replaces it when its
	// hyperplane is within polishSlack of the old one.
	tol := 100*u.est + 1e-9
	if e.coarse() {
		tol = math.Max(tol, polishSlack)
	}
	if math.Sqrt(dw) > tol || math.Abs(b-u.b) > tol {
		e.diag.PolishRejected++
		return
	}
	e.diag.MaxRank2 = math.Max(e.diag.MaxRank2, r2)
	nu := newUnitRec(w, b, a, errEff, pl.xs)
	nu.polished = true
	*u = nu
	e.diag.Polished++
}

// dedupe drops units found twice. The search's duplicate test compares a
// new unit with the known ones at its first measurement, where an oracle
// that rounds coarsely (float32) leaves b̂ off by the error of the kink's
// position on its line, which the expected error does not cover; after
// polish b̂ comes from the Jacobians, and two records of one unit agree.
// A unit whose every polish failed (no single unit's jump where its
// hyperplane should be) beside a polished unit with the same normal is a
// misplaced copy of it. Of two records, the one with the smaller expected
// error stays.
//
// From a coarse oracle, two records whose hyperplanes lie within
// polishSlack of each other (either orientation) are one unit too: a
// first reading can be off by more than its expected error (see
// applyPolish), and a copy, often with the other orientation, would make
// the orientations' least-squares problem degenerate and ruin the
// network. Distinct units that close are found as one anyway. A polished
// record is preferred.
func (e *extractor) dedupe() {
	var keep []unit
	for _, u := range e.units {
		dup := -1
		for k, v := range keep {
			if sameUnit(u, v) || sameNormal(u, v) && (failed(u) && v.polished || failed(v) && u.polished) || e.coarse() && nearUnit(u, v) {
				dup = k
				break
			}
		}
		switch {
		case dup < 0:
			keep = append(keep, u)
		case better(u, keep[dup]):
			keep[dup] = u
			e.diag.Duplicates++
		default:
			e.diag.Duplicates++
		}
	}
	e.units = keep
}

// better reports that record u of a unit is to be kept over v: polished
// over not, else the smaller expected error.
func better(u, v unit) bool {
	if u.polished != v.polished {
		return u.polished
	}
	return u.est < v.est
}

// nearUnit reports two unit records whose hyperplanes (either orientation)
// lie within polishSlack: ‖ŵ_u ∓ ŵ_v‖ and |b̂_u ∓ b̂_v|.
func nearUnit(u, v unit) bool {
	c := dotf(u.w, v.w)
	return math.Sqrt(math.Max(0, 2-2*math.Abs(c))) <= polishSlack && math.Abs(u.b-math.Copysign(1, c)*v.b) <= polishSlack
}

// failed reports a unit polish gave up on.
func failed(u unit) bool { return !u.polished && u.tries >= polishTries }

// sameNormal reports that two unit records have the same normal (either
// orientation) to within 10 times their expected errors.
func sameNormal(u, v unit) bool {
	ew := 10 * (u.estW + v.estW)
	return math.Abs(dotf(u.w, v.w)) > 1-math.Max(1e-8, ew*ew/2)
}

// sameUnit reports that two unit records have the same hyperplane: the
// same normal and offset to within 10 times their expected errors.
func sameUnit(u, v unit) bool {
	c := dotf(u.w, v.w)
	return sameNormal(u, v) && math.Abs(u.b-math.Copysign(1, c)*v.b) <= 1e-6*(1+math.Abs(u.b))+10*(u.est+v.est)
}
