package extract

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

// regionsMax caps the activation regions lastByRegions searches, and
// regionLines the lines searched in each.
const (
	regionsMax  = 48
	regionLines = 12
)

// partial is a last-layer unit as seen in one activation region of the
// layer before it (units S active): the products A_{:,j}·W_{j,S} (p×|S|,
// columns in S's order) and A_{:,j}·b_j, exact whatever the scale the
// unit was found at.
type partial struct {
	S    []int
	prod *mat.Dense
	pb   []float64
	a    []float64
}

// lastByRegions extracts the last hidden layer (0-based k ≥ 2) when the
// region where every unit of layer k is active is too small to cross its
// units (three or more hidden layers). In a region where the units S of
// layer k are active and the others not (and layers 2…k−1 all active), the
// rest of the network is a one-hidden-layer network in the first layer's
// space whose unit j has the normal W_{j,S}·M_S (M_S the rows S of layer
// k's composite map): the one-layer extraction there gives A_{:,j}·W_{j,S}
// and A_{:,j}·b_j exactly, with orientations resolved. Regions come from
// random points of the domain; the partial rows of one unit, recognised
// by the direction of A_{:,j} (two or more outputs) and agreeing where
// they overlap, are unified into whole rows (Carlini et al.'s unification
// of partial signatures). It returns the layer's rows, biases and output
// columns, or a message saying what is missing.
func (r *deepRun) lastByRegions(ctx context.Context, k int, so Options) (W *mat.Dense, b []float64, A *mat.Dense, lines, kinks int, msg string, err error) {
	base, err := r.frameAfter(k - 1)
	if err != nil {
		return nil, nil, nil, 0, 0, err.Error(), nil
	}
	M, beta := r.composite(k)
	mk, m1 := M.Dims()
	rng := synth.NewRand(so.Seed + 991)
	var recs []partial
	want := so.Hidden
	// Region seeds cycle through layer k's units: a random point of the
	// domain where unit reg mod m_k is active (a hit-and-run walk from the
	// centre of that part), so that a unit active only in a corner has
	// its inputs seen too.
	seeds := make([]*domain, mk)
	for reg := 0; reg < regionsMax; reg++ {
		i0 := reg % mk
		if seeds[i0] == nil {
			walls := append(append([]unit(nil), base.dom.walls...), normWall(M.RawRowView(i0), beta[i0]))
			c, t, lerr := activeCenter(walls, m1)
			if lerr != nil || t <= 0 {
				continue
			}
			seeds[i0] = &domain{walls: walls, center: c, radius: t, cur: append([]float64(nil), c...)}
		}
		h := seeds[i0].sample(rng)
		walls := append([]unit(nil), base.dom.walls...)
		var S []int
		for i := 0; i < mk; i++ {
			z := dotf(M.RawRowView(i), h) + beta[i]
			row := append([]float64(nil), M.RawRowView(i)...)
			bi := beta[i]
			if z > 0 {
				S = append(S, i)
			} else {
				for j := range row {
					row[j] = -row[j]
				}
				bi = -bi
			}
			walls = append(walls, normWall(row, bi))
		}
		if len(S) == 0 {
			continue
		}
		center, t, lerr := activeCenter(walls, m1)
		if lerr != nil || t <= 1e-6 {
			continue
		}
		dom := &domain{walls: walls, center: center, radius: t, cur: append([]float64(nil), center...)}
		ro := so
		ro.Hidden, ro.MaxLines = 0, regionLines
		ro.Seed = so.Seed + uint64(reg)*7919
		ro.Progress = nil
		e := newExtractor(m1, ro, &counted{f: affineOracle(r.root, base.P, base.q), d: m1})
		e.dom = dom
		if _, err := e.search(ctx); err != nil {
			return nil, nil, nil, lines, kinks, "", err
		}
		r.addDiag(e.diag)
		lines += len(e.lines)
		for _, lr := range e.lines {
			kinks += len(lr.kinks)
		}
		net, err := e.assemble(true)
		if err != nil {
			return nil, nil, nil, lines, kinks, "", err
		}
		if net == nil {
			continue
		}
		MS := mat.NewDense(len(S), m1, nil)
		bS := make([]float64, len(S))
		for c, i := range S {
			MS.SetRow(c, M.RawRowView(i))
			bS[c] = beta[i]
		}
		MSp, err := pinv(MS)
		if err != nil {
			continue
		}
		for j := 0; j < net.Hidden(); j++ {
			w := net.W.RawRowView(j)
			var u mat.VecDense
			u.MulVec(MSp.T(), mat.NewVecDense(m1, w))
			// w must lie in the row space of M_S.
			var back mat.VecDense
			back.MulVec(MS.T(), &u)
			if d := floats(back.RawVector().Data, w); d > 1e-6 {
				continue
			}
			a := mat.Col(nil, j, net.A)
			bias := net.B[j] - dotf(u.RawVector().Data, bS)
			prod := mat.NewDense(len(a), len(S), nil)
			pb := make([]float64, len(a))
			for o := range a {
				for c := range S {
					prod.Set(o, c, a[o]*u.AtVec(c))
				}
				pb[o] = a[o] * bias
			}
			recs = append(recs, partial{S: S, prod: prod, pb: pb, a: a})
		}
		if want > 0 && countWhole(unify(recs, mk)) >= want {
			break
		}
	}
	units := unify(recs, mk)
	var whole []unified
	for _, u := range units {
		if u.whole() {
			whole = append(whole, u)
		}
	}
	if len(whole) == 0 {
		return nil, nil, nil, lines, kinks, fmt.Sprintf("no unit seen with every input active (%d partial units from %d records)", len(units), len(recs)), nil
	}
	p := len(whole[0].a)
	W = mat.NewDense(len(whole), mk, nil)
	A = mat.NewDense(p, len(whole), nil)
	b = make([]float64, len(whole))
	for j, u := range whole {
		// Q = A_j·W_jᵀ (rank one): W_j's direction is Q's row space,
		// oriented so that A_j = Q·ŵ points along the records' columns.
		var svd mat.SVD
		if !svd.Factorize(u.Q, mat.SVDThin) {
			return nil, nil, nil, lines, kinks, "a unit's rows could not be factored", nil
		}
		var V mat.Dense
		svd.VTo(&V)
		w := mat.Col(nil, 0, &V)
		var Aw mat.VecDense
		Aw.MulVec(u.Q, mat.NewVecDense(mk, w))
		if dotf(Aw.RawVector().Data, u.a) < 0 {
			for i := range w {
				w[i] = -w[i]
			}
			Aw.ScaleVec(-1, &Aw)
		}
		W.SetRow(j, w)
		A.SetCol(j, Aw.RawVector().Data)
		av := Aw.RawVector().Data
		b[j] = dotf(av, u.pb) / dotf(av, av)
	}
	if want > 0 && len(whole) < want {
		msg = fmt.Sprintf("%d of %d units seen with every input active", len(whole), want)
	}
	return W, b, A, lines, kinks, msg, nil
}

// unified is one unit's partial rows merged: Q (p×m_k) holds A_j·W_{j,i}
// for the inputs i seen (seen[i]), pb = A_j·b_j, a a column of A_j's
// direction.
type unified struct {
	Q    *mat.Dense
	seen []bool
	pb   []float64
	a    []float64
}

func (u unified) whole() bool {
	for _, s := range u.seen {
		if !s {
			return false
		}
	}
	return true
}

func countWhole(us []unified) int {
	n := 0
	for _, u := range us {
		if u.whole() {
			n++
		}
	}
	return n
}

// unify merges the records of one unit: the same direction of A_j (cosine
// above 1 − 1e-6) and the same products where their inputs overlap
// (relative 1e-6), with the same A_j·b_j.
func unify(recs []partial, mk int) []unified {
	var out []unified
	for _, rc := range recs {
		p := len(rc.a)
		match := -1
		for i, u := range out {
			if math.Abs(cosine(u.a, rc.a)) < 1-1e-6 || floats(u.pb, rc.pb) > 1e-6 {
				continue
			}
			ok := true
			for c, in := range rc.S {
				if !u.seen[in] {
					continue
				}
				for o := 0; o < p; o++ {
					x, y := u.Q.At(o, in), rc.prod.At(o, c)
					if math.Abs(x-y) > 1e-6*(math.Abs(x)+math.Abs(y))+1e-12 {
						ok = false
					}
				}
			}
			if ok {
				match = i
				break
			}
		}
		if match < 0 {
			out = append(out, unified{Q: mat.NewDense(p, mk, nil), seen: make([]bool, mk), pb: rc.pb, a: rc.a})
			match = len(out) - 1
		}
		u := out[match]
		for c, in := range rc.S {
			if !u.seen[in] {
				u.seen[in] = true
				for o := 0; o < p; o++ {
					u.Q.Set(o, in, rc.prod.At(o, c))
				}
			}
		}
	}
	return out
}

// cosine is the cosine of the angle between a and b.
func cosine(a, b []float64) float64 {
	return dotf(a, b) / math.Sqrt(dotf(a, a)*dotf(b, b))
}

// floats is the relative distance ‖a − b‖/(‖a‖ + ‖b‖) (0 for two zeros).
func floats(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
	}
	n := math.Sqrt(dotf(a, a)) + math.Sqrt(dotf(b, b))
	if n == 0 {
		return 0
	}
	return math.Sqrt(d) / n
}
