package extract

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"
)

// hFrac is the forward-difference step as a fraction of the distance from
// the measurement point to the nearest kink on the line. Another unit's
// hyperplane is crossed by a coordinate step h·e_j only if h·|ŵ_kj| exceeds
// |z_k|; kinks near a point have |ŵ_k·v| distributed like |ŵ_k|·Rayleigh, so
// 1/32 makes a crossing rare, and the check step catches the rest.
const hFrac = 1.0 / 32

// jobs is a batch of Jacobian measurements: piece p of line lr at its
// midpoint with step h.
type jacJob struct {
	lr    *lineResult
	p     *piece
	shrnk float64
	x     []float64
	h     float64
	ok    bool
}

// measure computes the Jacobian of f on the linear region of each job's
// piece by forward differences along the coordinate axes from the piece's
// midpoint (d + 1 queries), plus one check query along a random ±1
// direction whose prediction J·s must match to rounding. f is exactly
// affine on the region, so the only errors are the oracle's rounding over
// the step. Jobs that fail the check are retried with steps 8 and 64 times
// smaller; a job that fails all three is left without J.
func (e *extractor) measure(ctx context.Context, jobs []*jacJob) error {
	todo := jobs
	for _, shrink := range []float64{1, 1.0 / 8, 1.0 / 64} {
		for _, j := range todo {
			j.shrnk = shrink
		}
		if err := e.measureOnce(ctx, todo); err != nil {
			return err
		}
		var next []*jacJob
		for _, j := range todo {
			if !j.ok {
				next = append(next, j)
			}
		}
		if len(next) == 0 {
			return nil
		}
		e.diag.JacobianRetries += len(next)
		todo = next
	}
	return nil
}

func (e *extractor) measureOnce(ctx context.Context, jobs []*jacJob) error {
	d := e.d
	rowsPer := d + 2
	per := max(1, e.opt.Batch/rowsPer)
	for s := 0; s < len(jobs); s += per {
		batch := jobs[s:min(s+per, len(jobs))]
		X := mat.NewDense(len(batch)*rowsPer, d, nil)
		steps := make([][]float64, len(batch))
		checks := make([][]float64, len(batch))
		for b, j := range batch {
			l := j.lr.l
			tm := (j.p.ta + j.p.tb) / 2
			if math.IsInf(tm, 0) || math.IsNaN(tm) {
				tm = j.p.ta
			}
			j.p.tm = tm
			x := make([]float64, d)
			l.at(tm, x)
			j.x = x
			h := hFrac * (j.p.tb - j.p.ta) / 2 * j.shrnk
			h = math.Min(h, e.knownMargin(x))
			// The step must stay well above the rounding of x itself.
			h = math.Max(h, 1e-8*(1+maxAbs(x)))
			j.h = h
			j.p.h = h
			r0 := b * rowsPer
			X.SetRow(r0, x)
			st := make([]float64, d)
			for c := 0; c < d; c++ {
				row := X.RawRowView(r0 + 1 + c)
				copy(row, x)
				row[c] = x[c] + h
				st[c] = row[c] - x[c]
			}
			steps[b] = st
			ck := X.RawRowView(r0 + d + 1)
			chk := make([]float64, d)
			inv := h / math.Sqrt(float64(d))
			for c := 0; c < d; c++ {
				s := inv
				if e.rng.Uint64()&1 == 1 {
					s = -inv
				}
				ck[c] = x[c] + s
				chk[c] = ck[c] - x[c]
			}
			checks[b] = chk
		}
		Y, err := e.o.query(ctx, X)
		if err != nil {
			return err
		}
		e.diag.QueriesJacobian += len(batch) * rowsPer
		p := e.o.p
		for b, j := range batch {
			r0 := b * rowsPer
			f0 := Y.RawRowView(r0)
			J := mat.NewDense(p, d, nil)
			for c := 0; c < d; c++ {
				fc := Y.RawRowView(r0 + 1 + c)
				for o := 0; o < p; o++ {
					J.Set(o, c, (fc[o]-f0[o])/steps[b][c])
				}
			}
			fk := Y.RawRowView(r0 + d + 1)
			pred := make([]float64, p)
			for o := 0; o < p; o++ {
				pred[o] = f0[o] + dotf(J.RawRowView(o), checks[b])
			}
			j.ok = true
			sc := j.lr.scale
			for o := 0; o < p; o++ {
				tol := 10 * j.lr.eta * (math.Abs(f0[o]) + math.Abs(fk[o]) + sc[o])
				if math.Abs(fk[o]-pred[o]) > tol {
					j.ok = false
				}
			}
			e.diag.Jacobians++
			if j.ok {
				j.p.J = J
				j.p.measured = true
				e.jpoints = append(e.jpoints, jpoint{x: j.x, J: J})
			}
		}
	}
	return nil
}

// knownMargin is the largest step along a coordinate axis from x that
// crosses no known unit's hyperplane (with a factor 4 to spare).
func (e *extractor) knownMargin(x []float64) float64 {
	m := math.Inf(1)
	for _, u := range e.units {
		z := math.Abs(dotf(u.w, x) + u.b)
		m = math.Min(m, z/u.winf/4)
	}
	return m
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

func dotf(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
