package extract

import (
	"context"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
)

// hFrac is the forward-difference step as a fraction of the distance from
// the measurement point to the nearest kink on the line. Another unit's
// hyperplane is crossed by a coordinate step h·e_j only if h·|ŵ_kj| exceeds
// |z_k|; kinks near a point have |ŵ_k·v| distributed like |ŵ_k|·Rayleigh, so
// 1/16 makes a crossing rare, and the check step catches the rest.
const hFrac = 1.0 / 16

// jacJob is one Jacobian measurement: at x with coordinate step h (shrunk
// on retries), outputs compared against scale in the check. For a line's
// piece, p is the piece (x and h are set from it).
type jacJob struct {
	x     []float64
	h     float64
	scale []float64
	lr    *lineResult
	p     *piece
	// Results: J (p×d), f0 = f(x), ok when the check passed.
	J    *mat.Dense
	f0   []float64
	errJ float64
	ok   bool
}

// pieceJob returns the job measuring the Jacobian of a line's piece at its
// midpoint, with a step of hFrac times the distance to the piece's ends,
// capped so that no known unit's hyperplane is crossed.
func (e *extractor) pieceJob(lr *lineResult, p *piece) *jacJob {
	tm := (p.ta + p.tb) / 2
	p.tm = tm
	x := make([]float64, e.d)
	lr.l.at(tm, x)
	h := hFrac * (p.tb - p.ta) / 2
	h = math.Min(h, e.knownMargin(x, -1)/4)
	return &jacJob{x: x, h: h, scale: lr.scale, lr: lr, p: p}
}

// nearFrac is where nearJob measures, as a fraction of the way from a
// kink to the far end of the piece beside it.
const nearFrac = 1.0 / 8

// nearJob returns the job measuring the Jacobian beside the kink at t,
// nearFrac of the way to end (the far end of the piece on that side).
// Behind a coarse oracle a piece often holds kinks below the rounding,
// and a jump between the pieces' midpoints holds theirs too; measured
// near the kink, fewer lie between, at the price of a smaller step.
func (e *extractor) nearJob(lr *lineResult, t, end float64) *jacJob {
	tm := t + nearFrac*(end-t)
	x := make([]float64, e.d)
	lr.l.at(tm, x)
	h := hFrac * math.Abs(end-t) * nearFrac
	h = math.Min(h, e.knownMargin(x, -1)/4)
	return &jacJob{x: x, h: h, scale: lr.scale, lr: lr}
}

// screenDirs is the number of directions along which jumpsOutside
// measures each jump.
const screenDirs = 8

// jumpsOutside tells, for each pair of Jacobian jobs either side of a
// kink, whether the kink's jump reaches outside the span of the units
// found: it measures the two Jacobians along screenDirs random directions
// orthogonal to that span only (forward differences with the jobs' steps,
// 2·(screenDirs+1) queries instead of 2·(d+2)), and reports a jump above
// 3 times the rounding's. A unit of this layer not yet found has a normal
// outside the span; a known unit's jump and, where the known units span
// the layers before, a later layer's lie inside it. With no unit found
// every pair is reported.
func (e *extractor) jumpsOutside(ctx context.Context, pairs [][2]*jacJob) ([]bool, error) {
	out := make([]bool, len(pairs))
	d := e.d
	var basis [][]float64
	for _, u := range e.units {
		r := append([]float64(nil), u.w...)
		projectOut(r, basis)
		if n := math.Sqrt(dotf(r, r)); n > 1e-6 {
			for j := range r {
				r[j] /= n
			}
			basis = append(basis, r)
		}
	}
	if len(basis) == 0 || len(basis) >= d {
		for i := range out {
			out[i] = true
		}
		return out, nil
	}
	dirs := make([][]float64, screenDirs)
	for k := range dirs {
		r := make([]float64, d)
		for j := range r {
			r[j] = e.rng.NormFloat64()
		}
		projectOut(r, basis)
		n := math.Sqrt(dotf(r, r))
		for j := range r {
			r[j] /= n
		}
		dirs[k] = r
	}
	rowsPer := screenDirs + 1
	X := mat.NewDense(2*len(pairs)*rowsPer, d, nil)
	for i, pr := range pairs {
		for s, j := range pr {
			r0 := (2*i + s) * rowsPer
			X.SetRow(r0, j.x)
			for k, r := range dirs {
				row := X.RawRowView(r0 + 1 + k)
				for c := range row {
					row[c] = j.x[c] + j.h*r[c]
				}
			}
		}
	}
	Y, err := e.o.query(ctx, X)
	if err != nil {
		return nil, err
	}
	e.diag.QueriesJacobian += 2 * len(pairs) * rowsPer
	p := e.o.p
	for i, pr := range pairs {
		jump, noise := 0.0, 0.0
		for k := range dirs {
			for o := 0; o < p; o++ {
				var dv [2]float64
				for s, j := range pr {
					r0 := (2*i + s) * rowsPer
					dv[s] = (Y.At(r0+1+k, o) - Y.At(r0, o)) / j.h
				}
				jump += (dv[1] - dv[0]) * (dv[1] - dv[0])
			}
		}
		// Each difference carries the rounding of two values of f over
		// the step (readJacobian's expected error, per entry).
		for s, j := range pr {
			r0 := (2*i + s) * rowsPer
			F := 0.0
			for o := 0; o < p; o++ {
				F = math.Max(F, 2*math.Abs(Y.At(r0, o))+j.scale[o])
			}
			noise += math.Pow(e.nu()*F/j.h, 2)
		}
		out[i] = jump > 9*noise*float64(screenDirs*p)
	}
	return out, nil
}

// measure computes the Jacobian of f on the linear region around each
// job's point by forward differences along the coordinate axes (d + 1
// queries), plus one check query along a random ±1 direction s whose
// prediction f(x) + J·s must match to rounding. f is exactly affine on the
// region, so the only errors are the oracle's rounding over the step. Jobs
// that fail the check are retried with steps 8 and 64 times smaller; a job
// that fails all three is left with ok = false.
func (e *extractor) measure(ctx context.Context, jobs []*jacJob) error {
	todo := jobs
	for try := 0; try < 3; try++ {
		if try > 0 {
			for _, j := range todo {
				j.h /= 8
			}
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
		if try < 2 {
			e.diag.JacobianRetries += len(next)
		}
		todo = next
	}
	return nil
}

// measureOnce queries the Jacobian of every job by forward differences, in
// batches of about Options.Batch rows: per job its point, d coordinate
// steps and one random check step (jacobianRows), then the Jacobian read
// back and checked (readJacobian).
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
			steps[b], checks[b] = e.jacobianRows(X, b*rowsPer, j)
		}
		Y, err := e.o.query(ctx, X)
		if err != nil {
			return err
		}
		e.diag.QueriesJacobian += len(batch) * rowsPer
		for b, j := range batch {
			e.readJacobian(j, Y, b*rowsPer, steps[b], checks[b])
		}
	}
	return nil
}

// jacobianRows writes job j's d+2 query rows into X from row r0: its point
// x, x plus a step h along each coordinate, and x plus a random ±h/√d
// check step. The step must stay well above the rounding of x itself. It
// returns the coordinate steps and the check step as represented.
//
// A coarse oracle (float32) rounds its inputs too: a step of h on a
// coordinate of size |x_c| would reach it as h ± ν·|x_c|, an error of
// ν·|x_c|/h in that column of J, 1e-5 or more relative for the steps the
// search can take, which the rank-one test of a jump would see. So for
// such an oracle the point and every step are rounded to float32 here,
// and the steps are the differences of what the oracle evaluates.
func (e *extractor) jacobianRows(X *mat.Dense, r0 int, j *jacJob) (steps, check []float64) {
	d := e.d
	if e.coarse() {
		for c, v := range j.x {
			j.x[c] = float64(float32(v))
		}
	}
	x := j.x
	h := math.Max(j.h, 1e-8*(1+vec.MaxAbs(x)))
	j.h = h
	if j.p != nil {
		j.p.h = h
	}
	X.SetRow(r0, x)
	st := make([]float64, d)
	for c := 0; c < d; c++ {
		row := X.RawRowView(r0 + 1 + c)
		copy(row, x)
		row[c] = e.representable(x[c] + h)
		st[c] = row[c] - x[c]
	}
	ck := X.RawRowView(r0 + d + 1)
	chk := make([]float64, d)
	inv := h / math.Sqrt(float64(d))
	for c := 0; c < d; c++ {
		s := inv
		if e.rng.Uint64()&1 == 1 {
			s = -inv
		}
		ck[c] = e.representable(x[c] + s)
		chk[c] = ck[c] - x[c]
	}
	return st, chk
}

// representable returns v as the oracle reads it: rounded to float32 for
// a coarse oracle, v itself otherwise.
func (e *extractor) representable(v float64) float64 {
	if e.coarse() {
		return float64(float32(v))
	}
	return v
}

// readJacobian reads job j's Jacobian from the answers Y (its rows from
// r0), checks it against the check step to 10·η, and sets its expected
// error: each entry carries the rounding of two values of f over the
// step, ‖δJ‖_F ≈ ν·F·√(p·d)/h. A Jacobian that passes is added to
// jsum (jx: where).
func (e *extractor) readJacobian(j *jacJob, Y *mat.Dense, r0 int, steps, checks []float64) {
	d, p := e.d, e.o.p
	f0 := Y.RawRowView(r0)
	J := mat.NewDense(p, d, nil)
	for c := 0; c < d; c++ {
		fc := Y.RawRowView(r0 + 1 + c)
		for o := 0; o < p; o++ {
			J.Set(o, c, (fc[o]-f0[o])/steps[c])
		}
	}
	fk := Y.RawRowView(r0 + d + 1)
	j.ok = true
	for o := 0; o < p; o++ {
		pred := f0[o] + dotf(J.RawRowView(o), checks)
		sc := math.Abs(f0[o])
		if j.scale != nil {
			sc = j.scale[o]
		}
		tol := 10 * e.eta * (math.Abs(f0[o]) + math.Abs(fk[o]) + sc)
		// Negated so that a NaN fails too: a step the oracle's rounding
		// took back to x (0/0 in J) must not reach jsum.
		if !(math.Abs(fk[o]-pred) <= tol) {
			j.ok = false
		}
	}
	e.diag.Jacobians++
	F := 0.0
	for o := 0; o < p; o++ {
		sc := 0.0
		if j.scale != nil {
			sc = j.scale[o]
		}
		F = math.Max(F, 2*math.Abs(f0[o])+sc)
	}
	j.errJ = e.nu() * F * math.Sqrt(float64(p*d)) / j.h
	if j.ok {
		j.J = J
		j.f0 = append([]float64(nil), f0...)
		if e.jsum == nil {
			e.jsum = mat.NewDense(p, d, nil)
		}
		e.jsum.Add(e.jsum, J)
		e.jx = append(e.jx, j.x)
		if j.p != nil {
			j.p.errJ = j.errJ
			j.p.J = J
			j.p.measured = true
		}
	}
}

// knownMargin is the largest coordinate step from x that crosses no known
// unit's hyperplane (unit skip excepted) nor leaves the domain:
// min_k |z_k(x)|/‖ŵ_k‖_∞ over units and walls.
func (e *extractor) knownMargin(x []float64, skip int) float64 {
	m := math.Inf(1)
	for i, u := range e.units {
		if i == skip {
			continue
		}
		z := math.Abs(dotf(u.w, x) + u.b)
		m = math.Min(m, z/u.winf)
	}
	if e.dom != nil {
		for _, u := range e.dom.walls {
			m = math.Min(m, (dotf(u.w, x)+u.b)/u.winf)
		}
	}
	return m
}

// median returns the median of x, the upper one for an even count; it
// sorts x.
func median(x []float64) float64 {
	slices.Sort(x)
	return x[len(x)/2]
}

// projectOut removes from r its components along the orthonormal rows
// of basis (one Gram–Schmidt pass).
func projectOut(r []float64, basis [][]float64) {
	for _, q := range basis {
		c := dotf(r, q)
		for j := range r {
			r[j] -= c * q[j]
		}
	}
}

func dotf(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
