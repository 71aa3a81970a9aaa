package extract

import (
	"context"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
)

// domain is the part of a stage's input space the extraction may query:
// the points where every wall w·x + b is positive. A stage after the first
// runs in the space of the last known layer's pre-activations, and its
// domain is where every known unit is active, so that the known layers are
// one affine map there (see deep.go).
type domain struct {
	// walls are the affine functions that must stay positive, with unit
	// normals (winf set).
	walls []unit
	// center is a point of the domain, and radius scales the random
	// points sample draws around it.
	center []float64
	radius float64
	// halfNormal draws the orthant's points as |N(0,1)| per coordinate.
	halfNormal bool
	// extra marks an orthant cut by walls beyond its faces (the lift of
	// a deeper frame): its random points and edges are kept inside them.
	extra bool
	// cur is the state of the hit-and-run walk that samples a general
	// domain.
	cur []float64
}

// orthant is the domain {h : h_k > 0 for all k} of dim coordinates,
// sampled around 1 (the pre-activations of a layer with unit rows are of
// order one on standard Gaussian inputs).
func orthant(dim int) *domain {
	dom := &domain{center: make([]float64, dim), radius: 1, halfNormal: true}
	for k := 0; k < dim; k++ {
		w := make([]float64, dim)
		w[k] = 1
		dom.walls = append(dom.walls, unit{w: w, winf: 1})
		dom.center[k] = 1
	}
	return dom
}

// margin is min over the walls of w·x + b (negative outside the domain).
func (dom *domain) margin(x []float64) float64 {
	m := math.Inf(1)
	for _, u := range dom.walls {
		m = math.Min(m, dotf(u.w, x)+u.b)
	}
	return m
}

// sample returns a random point of the domain: on the orthant |N(0,1)|
// per coordinate, half of them scaled by 0.02; on a general domain the
// next point of a hit-and-run walk from its centre.
func (dom *domain) sample(rng *rand.Rand) []float64 {
	dim := len(dom.center)
	x := make([]float64, dim)
	if dom.halfNormal {
		// Half the coordinates small: the layer's outputs on Gaussian
		// inputs are zero half the time, and a later unit whose
		// hyperplane meets the orthant only near its faces is crossed
		// only there. Points outside the extra walls are drawn again,
		// up to orthantTries times, before the walk takes over.
		for try := 0; try < orthantTries; try++ {
			for k := range x {
				x[k] = math.Abs(rng.NormFloat64())
				if rng.Uint64()&1 == 1 {
					x[k] *= 0.02
				}
			}
			if !dom.extra || dom.margin(x) > 0 {
				return x
			}
		}
	}
	// Hit-and-run: from the walk's point, along a random direction, to a
	// uniform point of the chord (kept off the walls), a few steps per
	// sample; unbounded chords are cut at 10·(1 + ‖centre‖).
	lim := 10 * (1 + math.Sqrt(dotf(dom.center, dom.center)))
	v := make([]float64, dim)
	for step := 0; step < 8; step++ {
		for k := range v {
			v[k] = rng.NormFloat64()
		}
		lo, hi := dom.segment(dom.cur, v)
		lo, hi = math.Max(lo, -lim), math.Min(hi, lim)
		t := lo + (hi-lo)*(0.02+0.96*rng.Float64())
		next := make([]float64, dim)
		for k := range next {
			next[k] = dom.cur[k] + t*v[k]
		}
		if dom.margin(next) > 0 {
			dom.cur = next
		}
	}
	copy(x, dom.cur)
	return x
}

// wallPad is the clearance segment keeps from the walls of a lifted
// frame, relative to the size of its centre.
const wallPad = 1e-7

// orthantTries is how many orthant points sample draws before it walks.
const orthantTries = 64

// segment returns the part lo < t < hi of the line x0 + t·v inside the
// domain (x0 inside it).
func (dom *domain) segment(x0, v []float64) (lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	pad := 0.0
	if dom.extra {
		// The walls of a lifted frame are the earlier layers' units as
		// found, off the true ones by their errors times the lift's
		// scale: the segment keeps clear of them by wallPad of it.
		pad = wallPad * (1 + math.Sqrt(dotf(dom.center, dom.center)))
	}
	for _, u := range dom.walls {
		z, r := dotf(u.w, x0)+u.b-pad, dotf(u.w, v)
		switch {
		case r < 0:
			hi = math.Min(hi, z/-r)
		case r > 0:
			lo = math.Max(lo, -z/r)
		}
	}
	return lo, hi
}

// axisEdge is how far axisLine runs from the orthant's faces.
const axisEdge = 0.02

// axisLine is the line along coordinate k near the orthant's edge, h =
// axisEdge·1 + t·e_k for 0 ≤ t ≤ reach·√dim, cut to the extra walls (nil
// when they leave none of it). A hyperplane w·h + b = 0 with
// b ≠ 0 meets the closed orthant if and only if it meets one of its edge
// rays {t·e_k : t ≥ 0} (at t = −b/w_k > 0), so the edges cross every later
// unit that is not active everywhere or nowhere on it, even one whose
// hyperplane cuts off only a thin corner, which random lines rarely reach.
func (dom *domain) axisLine(k int, reach float64) *line {
	dim := len(dom.center)
	l := &line{x0: make([]float64, dim), v: make([]float64, dim)}
	for j := range l.x0 {
		l.x0[j] = axisEdge
	}
	l.v[k] = 1
	l.lo, l.hi = 0, reach*math.Sqrt(float64(dim))
	l.edge = true
	if dom.extra {
		lo, hi := dom.segment(l.x0, l.v)
		l.lo, l.hi = math.Max(l.lo, lo), math.Min(l.hi, hi)
		if l.hi <= l.lo {
			return nil // the walls cut this edge off
		}
	}
	return l
}

// walls returns the domain's walls (none without a domain).
func (e *extractor) walls() []unit {
	if e.dom == nil {
		return nil
	}
	return e.dom.walls
}

// affineOracle is the oracle seen through the affine map x = P·h + q
// (P d×m): it answers queries h (rows) with the oracle's outputs at x.
func affineOracle(o *counted, P *mat.Dense, q []float64) Oracle {
	return func(ctx context.Context, H *mat.Dense) (*mat.Dense, error) {
		n, _ := H.Dims()
		d, _ := P.Dims()
		X := mat.NewDense(n, d, nil)
		X.Mul(H, P.T())
		for i := 0; i < n; i++ {
			row := X.RawRowView(i)
			for j := range row {
				row[j] += q[j]
			}
		}
		return o.query(ctx, X)
	}
}
