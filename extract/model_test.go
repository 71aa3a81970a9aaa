package extract

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

// A Jacobian jump across a new unit's kink that also holds the jump of a
// known unit whose kink the line search did not resolve (hidden in the
// piece beside it) is read as the new unit once the known unit's jump is
// subtracted; a kink with a known unit crossing right beside it (two units
// merged) is refused, and a jump that known units explain entirely counts
// as a known kink.
func TestReadUnitSubtractsHiddenKnownUnit(t *testing.T) {
	const d, p = 20, 4
	rng := synth.NewRand(7)
	gauss := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	unitVec := func(v []float64) []float64 {
		n := math.Sqrt(dotf(v, v))
		for i := range v {
			v[i] /= n
		}
		return v
	}
	l := &line{x0: gauss(d), v: unitVec(gauss(d)), t: []float64{-3, -2, -1, 1, 2, 3}}
	// Unit i (unit normal w, output column a) with its kink at t_i.
	type tu struct{ w, a []float64 }
	us := []tu{{unitVec(gauss(d)), gauss(p)}, {unitVec(gauss(d)), gauss(p)}}
	rec := func(u tu, ti float64) unit {
		x := make([]float64, d)
		l.at(ti, x)
		return newUnitRec(u.w, -dotf(u.w, x), u.a, 1e-14, x)
	}
	// The Jacobian at x(t) of the units whose kinks lie at ts.
	jac := func(t float64, ts []float64) *mat.Dense {
		J := mat.NewDense(p, d, nil)
		x := make([]float64, d)
		l.at(t, x)
		for i, u := range us[:len(ts)] {
			r := rec(u, ts[i])
			if dotf(r.w, x)+r.b > 0 {
				for o := range r.a {
					for j := range r.w {
						J.Set(o, j, J.At(o, j)+r.a[o]*r.w[j])
					}
				}
			}
		}
		return J
	}
	run := func(tKnown float64, withNew bool) (bool, *extractor) {
		ts := []float64{tKnown, 0}
		if !withNew {
			ts = ts[:1]
		}
		e := newExtractor(d, Options{}, &counted{d: d})
		e.units = []unit{rec(us[0], tKnown)}
		P := &piece{a: 0, b: 2, tm: -2.5, errJ: 1e-13}
		Q := &piece{a: 3, b: 5, tm: 2.5, errJ: 1e-13}
		lr := &lineResult{l: l, pieces: []*piece{P, Q}}
		// The slope change along the line at the kink t* = 0: the new
		// unit's (the known one's too when it crosses beside it).
		ds := make([]float64, p)
		for i, ti := range ts {
			if math.Abs(ti) < 1.5 {
				r := rec(us[i], ti)
				for o := range ds {
					ds[o] += r.a[o] * math.Abs(dotf(r.w, l.v))
				}
			}
		}
		k := &kink{t: 0, ds: ds, left: 0, right: 1, unit: -1}
		got, ok := e.readUnit(lr, k, jac(P.tm, ts), jac(Q.tm, ts), P.errJ+Q.errJ)
		if ok && withNew {
			want := rec(us[1], 0)
			if c := math.Abs(dotf(got.w, want.w)); c < 1-1e-12 || math.Abs(math.Abs(got.b)-math.Abs(want.b)) > 1e-9 {
				t.Errorf("new unit read with |cos| %.15f, b %.6f; want 1, ±%.6f", c, got.b, want.b)
			}
		}
		return ok, e
	}
	if ok, e := run(-2.3, true); !ok {
		t.Errorf("jump of a hidden known unit and a new one refused (rejected %d)", e.diag.Rejected)
	}
	if ok, _ := run(-0.5, true); ok {
		t.Error("kink of a new unit merged with a known one's read as a unit at t*")
	}
	if ok, e := run(-2.3, false); ok || e.diag.KnownKinks != 1 || e.diag.Rejected != 0 {
		t.Errorf("jump of a known unit alone: ok %v, known kinks %d, rejected %d; want a known kink", ok, e.diag.KnownKinks, e.diag.Rejected)
	}
}
