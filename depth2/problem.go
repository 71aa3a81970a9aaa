package depth2

import (
	"math"
	"runtime"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/tensor"
)

// problem is one call of Fit, resolved once: the checked data and their
// sizes, the order ℓ and the width, and the options with their defaults.
// Every step of Fit reads it instead of re-deriving or re-checking.
type problem struct {
	X, Y *mat.Dense
	// n samples, d inputs, p outputs.
	n, d, p int
	// yy is ‖Y‖_F².
	yy float64
	// opt are the caller's options with their defaults filled in (the
	// certificate's tolerance from the data's precision); opt.Hidden is the
	// known width m (0: inferred from T̂_2).
	opt Options
	// ell is the order ℓ.
	ell int
	// dim is MomentOptions.Dim of the first moments: m for ℓ = 1 with a
	// known width, −1 (infer) for ℓ = 1 without, 0 (all d) for ℓ = 2.
	dim int
	// roundoff is the unit roundoff of the data (certify.Roundoff).
	roundoff float64
	// evals are the last networks eval was asked about (see eval).
	evals []evaluation
}

// newProblem validates opt, checks X and Y, resolves the order and checks
// that the width and the sample count suit it.
func newProblem(X, Y *mat.Dense, opt Options) (*problem, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	n, d, p, err := certify.CheckXY(X, Y)
	if err != nil {
		return nil, err
	}
	ell := opt.Order
	if ell == 0 {
		ell = 1
		if opt.Hidden > d {
			ell = 2
		}
	}
	if lim := tensor.SymLen(d, ell); opt.Hidden > lim {
		return nil, errs.Inputf("%d hidden units cannot be identified from order-%d moments in d = %d dimensions: they need linearly independent w_i^{⊗ℓ}, so m ≤ C(d+ℓ−1, ℓ) = %d", opt.Hidden, ell, d, lim)
	}
	if ell == 1 && opt.Hidden > d {
		return nil, errs.Inputf("ℓ = 1 needs m ≤ d (W of full rank); %d units in d = %d dimensions need order ℓ = 2", opt.Hidden, d)
	}
	if ell == 2 && opt.Hidden == 0 {
		return nil, errs.Options(errs.ErrInput, "the overcomplete route (ℓ = 2) needs the width: set ", errs.Option{Struct: "Options", Field: "Hidden"})
	}
	// The reduced dimension: m for ℓ = 1 (inferred if unknown), d for ℓ = 2.
	// An unknown width is checked against the floor of one unit here, and
	// against the sample count again once T̂_2 has shown it (findUnits):
	// assuming m = d here would refuse data that determine a narrow network.
	dim, kGuess := 0, d
	if ell == 1 {
		dim, kGuess = -1, 1
		if opt.Hidden > 0 {
			dim, kGuess = opt.Hidden, opt.Hidden
		}
	}
	if need := MinSamples(d, kGuess, ell); n < need {
		entries := tensor.SymLen(kGuess, 2*ell+2)
		return nil, errs.Inputf("the order-%d moment in k = %d dimensions has %d distinct entries; this route needs n ≥ max(1000, 20·d, 100·%d) = %d samples, got %d", 2*ell+2, kGuess, entries, entries, need, n)
	}
	yy := mat.Norm(Y, 2)
	u := certify.Roundoff(X, Y)
	if opt.CertTol == 0 {
		opt.CertTol = certify.DefaultTol(u)
	}
	return &problem{
		X: X, Y: Y, n: n, d: d, p: p, yy: yy * yy,
		opt: opt, ell: ell, dim: dim, roundoff: u,
	}, nil
}

// stage returns the progress callback of one stage (nil without Progress).
func (pr *problem) stage(name string) func(done, total int) {
	if pr.opt.Progress == nil {
		return nil
	}
	return func(done, total int) { pr.opt.Progress(name, done, total) }
}

// residual is ‖Y − net(X)‖_F/‖Y‖_F on all samples.
func (pr *problem) residual(net *nn.Depth2) float64 {
	return pr.eval(net).resid
}

// loss is ½‖Y − net(X)‖_F² on all samples.
func (pr *problem) loss(net *nn.Depth2) float64 {
	return pr.eval(net).loss
}

// evalChunk is the number of samples per chunk of problem.eval and
// evalGroups the most groups of chunks summed separately (both fixed, so the
// sums do not depend on GOMAXPROCS).
const (
	evalChunk  = 1024
	evalGroups = 32
)

// evaluation is a network's fit to all samples.
type evaluation struct {
	net   *nn.Depth2 // a copy of the parameters evaluated
	loss  float64    // ½‖Y − f(X)‖_F²
	resid float64    // ‖Y − f(X)‖_F/‖Y‖_F
}

// eval returns the loss and the relative residual of net on all samples in
// one pass over X without any n-row temporary: each fixed chunk of rows is
// evaluated into per-worker scratch and its sums of squares are added in a
// fixed order. Squares that could overflow or underflow (sums outside
// [1e-280, ∞)) send the residual to the scaled sums of certify.RelResidual
// instead. The last few results are kept, keyed by the parameters' values,
// because Fit asks for the same network's loss or residual more than once.
func (pr *problem) eval(net *nn.Depth2) evaluation {
	for _, e := range pr.evals {
		if sameParams(e.net, net) {
			return e
		}
	}
	m := net.Hidden()
	n, p := pr.n, pr.p
	chunks := (n + evalChunk - 1) / evalChunk
	groups := min(chunks, evalGroups)
	type sums struct{ rr, yy float64 }
	parts := make([]sums, groups)
	rn := newRowNet(net.W, net.B, net.A, net.C, net.L)
	xr, yr := pr.X.RawMatrix(), pr.Y.RawMatrix()
	scratch := make([][]float64, runtime.GOMAXPROCS(0))
	parallel.For(groups, func(wk, g int) {
		if scratch[wk] == nil {
			scratch[wk] = make([]float64, m+p)
		}
		h, out := scratch[wk][:m], scratch[wk][m:]
		var s sums
		for q := g * chunks / groups * evalChunk; q < min((g+1)*chunks/groups*evalChunk, n); q++ {
			x := xr.Data[q*xr.Stride : q*xr.Stride+xr.Cols]
			rn.forward(x, h, out)
			for t, y := range yr.Data[q*yr.Stride : q*yr.Stride+p] {
				r := out[t] - y
				s.rr += r * r
				s.yy += y * y
			}
		}
		parts[g] = s
	})
	var tot sums
	for _, s := range parts {
		tot.rr += s.rr
		tot.yy += s.yy
	}
	e := evaluation{net: net.Clone(), loss: tot.rr / 2}
	const tiny = 1e-280
	if tot.rr >= tiny && tot.yy >= tiny && !math.IsInf(tot.rr, 0) && !math.IsInf(tot.yy, 0) {
		e.resid = math.Sqrt(tot.rr / tot.yy)
	} else {
		e.resid = relResidual(pr.X, pr.Y, net)
	}
	if len(pr.evals) == 4 {
		pr.evals = pr.evals[1:]
	}
	pr.evals = append(pr.evals, e)
	return e
}

// rowNet is a network's parameters as contiguous row-major slices, for
// the per-sample loops of eval and FitImproper (mat.Dense's RawRowView and
// math.Max cost more than the arithmetic at these sizes).
type rowNet struct {
	m, d, p int
	w, b    []float64 // W (m×d), B
	a, c, l []float64 // A (p×m), C (nil: zero), L (p×d; nil: none)
}

func newRowNet(W *mat.Dense, B []float64, A *mat.Dense, C []float64, L *mat.Dense) rowNet {
	m, d := W.Dims()
	r := rowNet{m: m, d: d, w: rowMajor(W), b: B, c: C}
	if A != nil {
		r.p, _ = A.Dims()
		r.a = rowMajor(A)
	}
	if L != nil {
		r.l = rowMajor(L)
	}
	return r
}

// rowMajor returns M's entries row by row (M's own backing when it has no
// gaps).
func rowMajor(M *mat.Dense) []float64 {
	raw := M.RawMatrix()
	if raw.Stride == raw.Cols {
		return raw.Data[:raw.Rows*raw.Cols]
	}
	out := make([]float64, 0, raw.Rows*raw.Cols)
	for i := 0; i < raw.Rows; i++ {
		out = append(out, raw.Data[i*raw.Stride:i*raw.Stride+raw.Cols]...)
	}
	return out
}

// hidden writes ReLU(W·x + B) into h (length m). The builtin max is
// branch-free (a branch on the sign mispredicts half the time) and, unlike
// math.Max, inlined.
func (r *rowNet) hidden(x, h []float64) {
	d := r.d
	x = x[:d]
	for i := range h {
		h[i] = max(vec.Dot4(x, r.w[i*d:(i+1)*d])+r.b[i], 0)
	}
}

// forward writes f(x) = A·ReLU(W·x + B) + L·x + C into out (length p),
// using h (length m) as scratch.
func (r *rowNet) forward(x, h, out []float64) {
	r.hidden(x, h)
	m, d := r.m, r.d
	for t := range out {
		s := vec.Dot4(h, r.a[t*m:(t+1)*m])
		if r.l != nil {
			s += vec.Dot4(x, r.l[t*d:(t+1)*d])
		}
		if r.c != nil {
			s += r.c[t]
		}
		out[t] = s
	}
}

// sameParams reports whether a and b have the same parameters, bit for bit.
func sameParams(a, b *nn.Depth2) bool {
	if (a.L == nil) != (b.L == nil) || (a.C == nil) != (b.C == nil) {
		return false
	}
	same := func(u, v []float64) bool {
		if len(u) != len(v) {
			return false
		}
		for i := range u {
			if math.Float64bits(u[i]) != math.Float64bits(v[i]) {
				return false
			}
		}
		return true
	}
	dense := func(u, v *mat.Dense) bool {
		if u == nil {
			return true
		}
		ru, cu := u.Dims()
		rv, cv := v.Dims()
		if ru != rv || cu != cv {
			return false
		}
		for i := 0; i < ru; i++ {
			if !same(u.RawRowView(i), v.RawRowView(i)) {
				return false
			}
		}
		return true
	}
	return dense(a.W, b.W) && same(a.B, b.B) && dense(a.A, b.A) && same(a.C, b.C) && dense(a.L, b.L)
}
