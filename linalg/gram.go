package linalg

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/blasbackend"
	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/parallel"
)

// ErrIllConditioned reports a least-squares problem too ill-conditioned for
// the normal equations (GramLstSq); the caller should use LstSq (QR), which
// resolves condition numbers up to 1/(max(r, c)·ε).
var ErrIllConditioned = errs.New("linalg: too ill-conditioned for the normal equations", nil)

// GramChunk is the number of rows GramLstSq asks its fill function for at a
// time (the last chunk takes the remainder). The chunks, and the fixed groups
// of chunks that are summed in order, depend only on the row count, so the
// result is the same at any GOMAXPROCS.
const GramChunk = 1024

// gramGroups is the most groups of chunks GramLstSq sums separately (the
// units of parallel work).
const gramGroups = 32

// MaxGramCond is the largest condition number κ(D·FᵀF·D) (D the diagonal
// scaling to a unit diagonal) that GramLstSq accepts: each step of
// iterative refinement then shrinks the error by ≈ κ·ε ≤ 2e-6, down to the
// κ(F)²·ε·‖r‖/(‖F‖·‖x‖) that Householder QR has as well; above it the
// caller should use QR.
const MaxGramCond = 1e10

// GramLstSq returns the f×q matrix C minimising ‖F·C − Y‖_F for n×f features
// F and n×q targets Y that are never stored whole: fill(lo, hi, dst) writes
// the rows lo…hi−1 of [F Y] into dst ((hi−lo)×(f+q), row-major). fill is
// called for disjoint chunks from several goroutines at once, 1+refine
// times per chunk (once per pass over the data), and must write the same
// values each time.
//
// It solves the normal equations, scaled to a unit diagonal, by Cholesky,
// and then takes refine steps of iterative refinement, each from the
// residual of one more pass over the rows (one step makes the solution as
// accurate as QR's; 0 suffices for well-conditioned features whose fit
// needs no more than κ(F)²·ε relative accuracy). Unlike LstSq (QR) it needs
// no n×f matrix; it squares the condition number, so it refuses
// (ErrIllConditioned) when κ(D·FᵀF·D) > MaxGramCond or a column of F is
// zero, and the caller falls back to LstSq.
// It also returns κ(F·D) ≈ √κ(D·FᵀF·D). The sums run over GramChunk-row
// chunks in fixed groups, added in order: the same bits at any GOMAXPROCS.
// NaN or Inf in [F Y] give ErrNotFinite; n < f gives ErrShape; a cancelled
// ctx gives ctx.Err().
func GramLstSq(ctx context.Context, n, f, q, refine int, fill func(lo, hi int, dst blas64.General)) (*mat.Dense, float64, error) {
	if f < 1 || q < 1 || n < f {
		return nil, 0, fmt.Errorf("linalg.GramLstSq: %w: %d rows, %d features, %d targets (need rows ≥ features ≥ 1)", ErrShape, n, f, q)
	}
	chunks := (n + GramChunk - 1) / GramChunk
	gl := &gramLstSq{
		ctx: ctx, n: n, f: f, q: q, w: f + q, fill: fill,
		chunks: chunks, groups: min(chunks, gramGroups),
		scratch: make([][]float64, runtime.GOMAXPROCS(0)),
	}
	G, err := gl.gram()
	if err != nil {
		return nil, 0, err
	}
	kappa, err := gl.factor(G)
	if err != nil {
		return nil, 0, err
	}
	C, err := gl.solve(G[f:], gl.w)
	if err != nil {
		return nil, 0, err
	}
	for step := 0; step < refine; step++ {
		if err := gl.refineStep(C); err != nil {
			return nil, 0, err
		}
	}
	return C, math.Sqrt(kappa), nil
}

// gramLstSq holds the state GramLstSq's passes share: the shapes, the
// chunking of the rows, the workers' scratch, and the Cholesky factor of
// the scaled normal equations with its scaling D.
type gramLstSq struct {
	ctx            context.Context
	n, f, q, w     int // w = f + q, the width of a row of [F Y]
	fill           func(lo, hi int, dst blas64.General)
	chunks, groups int
	scratch        [][]float64
	parts          [][]float64
	scale          []float64 // the diagonal of D
	chol           mat.Cholesky
}

// chunk fills worker wk's scratch with chunk c of the rows of [F Y].
func (gl *gramLstSq) chunk(wk, c int) blas64.General {
	if gl.scratch[wk] == nil {
		gl.scratch[wk] = make([]float64, GramChunk*gl.w)
	}
	w := gl.w
	lo, hi := c*GramChunk, min((c+1)*GramChunk, gl.n)
	dst := blas64.General{Rows: hi - lo, Cols: w, Stride: w, Data: gl.scratch[wk][:(hi-lo)*w]}
	gl.fill(lo, hi, dst)
	return dst
}

// gram is pass 1: the upper triangle of [F Y]ᵀ[F Y] (w×w, row-major),
// summed in fixed groups of chunks added in order.
func (gl *gramLstSq) gram() ([]float64, error) {
	w, chunks, groups := gl.w, gl.chunks, gl.groups
	gl.parts = make([][]float64, groups)
	parallel.For(groups, func(wk, g int) {
		if gl.ctx.Err() != nil {
			return
		}
		acc := make([]float64, w*w)
		for c := g * chunks / groups; c < (g+1)*chunks/groups; c++ {
			AddGram(acc, gl.chunk(wk, c))
		}
		gl.parts[g] = acc
	})
	if err := gl.ctx.Err(); err != nil {
		return nil, err
	}
	G := sumParts(gl.parts)
	for _, v := range G {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("linalg.GramLstSq: %w: the Gram matrix of the rows has a NaN or Inf entry", ErrNotFinite)
		}
	}
	return G, nil
}

// factor scales FᵀF (the leading f×f block of G) to a unit diagonal,
// D·FᵀF·D, refuses it when a feature is zero or its condition number
// exceeds MaxGramCond, and factors it by Cholesky. It returns the
// condition number κ(D·FᵀF·D).
func (gl *gramLstSq) factor(G []float64) (float64, error) {
	f, w := gl.f, gl.w
	gl.scale = make([]float64, f)
	scale := gl.scale
	for i := range scale {
		if !(G[i*w+i] > 0) {
			return 0, fmt.Errorf("linalg.GramLstSq: %w: feature %d is zero on every row", ErrIllConditioned, i)
		}
		scale[i] = 1 / math.Sqrt(G[i*w+i])
	}
	gs := mat.NewSymDense(f, nil)
	for i := 0; i < f; i++ {
		for j := i; j < f; j++ {
			gs.SetSym(i, j, scale[i]*G[i*w+j]*scale[j])
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(gs, false) {
		return 0, fmt.Errorf("linalg.GramLstSq: %w", ErrNoConvergence)
	}
	lam := eig.Values(nil) // ascending
	kappa := lam[f-1] / lam[0]
	if !(lam[0] > 0) || !(kappa <= MaxGramCond) {
		return 0, fmt.Errorf("linalg.GramLstSq: %w: κ(DFᵀFD) = %.3g > %.0e (smallest eigenvalue %.3g)", ErrIllConditioned, kappa, MaxGramCond, lam[0])
	}
	if !gl.chol.Factorize(gs) {
		return 0, fmt.Errorf("linalg.GramLstSq: %w: Cholesky of the scaled Gram matrix failed (κ = %.3g)", ErrIllConditioned, kappa)
	}
	return kappa, nil
}

// solve returns D·(DGD)⁻¹·D·rhs for rhs f×q (row-major, stride s).
func (gl *gramLstSq) solve(rhs []float64, s int) (*mat.Dense, error) {
	f, q, scale := gl.f, gl.q, gl.scale
	b := mat.NewDense(f, q, nil)
	for i := 0; i < f; i++ {
		for t := 0; t < q; t++ {
			b.Set(i, t, scale[i]*rhs[i*s+t])
		}
	}
	var x mat.Dense
	if err := gl.chol.SolveTo(&x, b); err != nil {
		return nil, fmt.Errorf("linalg.GramLstSq: %w: %w", ErrIllConditioned, err)
	}
	for i := 0; i < f; i++ {
		for t := 0; t < q; t++ {
			x.Set(i, t, scale[i]*x.At(i, t))
		}
	}
	return &x, nil
}

// refineStep is one further pass over the rows, a step of iterative
// refinement: C += (FᵀF)⁻¹·Fᵀ(Y − F·C).
func (gl *gramLstSq) refineStep(C *mat.Dense) error {
	f, q, w, chunks, groups := gl.f, gl.q, gl.w, gl.chunks, gl.groups
	ct := make([]float64, q*f) // Cᵀ, row t = column t of C
	for i := 0; i < f; i++ {
		for t := 0; t < q; t++ {
			ct[t*f+i] = C.At(i, t)
		}
	}
	parallel.For(groups, func(wk, g int) {
		if gl.ctx.Err() != nil {
			return
		}
		acc := make([]float64, q*f) // (Fᵀr)ᵀ
		for c := g * chunks / groups; c < (g+1)*chunks/groups; c++ {
			dst := gl.chunk(wk, c)
			for k := 0; k < dst.Rows; k++ {
				row := dst.Data[k*w : (k+1)*w]
				x := row[:f]
				for t := 0; t < q; t++ {
					cf := ct[t*f : (t+1)*f]
					cf = cf[:len(x)]
					r := row[f+t]
					for i, v := range x {
						r -= v * cf[i]
					}
					if r == 0 {
						continue
					}
					at := acc[t*f : (t+1)*f]
					at = at[:len(x)]
					for i, v := range x {
						at[i] += v * r
					}
				}
			}
		}
		gl.parts[g] = acc
	})
	if err := gl.ctx.Err(); err != nil {
		return err
	}
	sum := sumParts(gl.parts)
	rhs := make([]float64, f*q)
	for i := 0; i < f; i++ {
		for t := 0; t < q; t++ {
			rhs[i*q+t] = sum[t*f+i]
		}
	}
	delta, err := gl.solve(rhs, q)
	if err != nil {
		return err
	}
	C.Add(C, delta)
	return nil
}

// sumParts adds the parts in order.
func sumParts(parts [][]float64) []float64 {
	out := append([]float64(nil), parts[0]...)
	for _, p := range parts[1:] {
		for i, v := range p {
			out[i] += v
		}
	}
	return out
}

// AddGram adds the upper triangle of aᵀa to c (a.Cols×a.Cols, row-major,
// stride a.Cols); the strictly lower triangle of c is not touched. It sums
// four rows of a at a time into two rows of c (internal/kern.Pair4: AVX2
// where the CPU has it, the same bits either way), about twice as fast as
// gonum's pure-Go Dsyrk for the narrow (≲ 50-column) row-major chunks of
// sample data without AVX2, several times with it. With a native BLAS (the openblas build tag) it is that
// BLAS's Dsyrk instead, several times faster again; the sums' order, and so
// the last bits, then follow that BLAS.
func AddGram(c []float64, a blas64.General) {
	f := a.Cols
	_ = c[f*f-1]
	if blasbackend.Native() {
		if a.Rows > 0 {
			blas64.Syrk(blas.Trans, 1, a, 1, blas64.Symmetric{Uplo: blas.Upper, N: f, Stride: f, Data: c})
		}
		return
	}
	q := 0
	var x [8]float64
	for ; q+4 <= a.Rows; q += 4 {
		r0 := a.Data[q*a.Stride : q*a.Stride+f]
		r1 := a.Data[(q+1)*a.Stride : (q+1)*a.Stride+f]
		r2 := a.Data[(q+2)*a.Stride : (q+2)*a.Stride+f]
		r3 := a.Data[(q+3)*a.Stride : (q+3)*a.Stride+f]
		i := 0
		for ; i+2 <= f; i += 2 {
			x0, x1, x2, x3 := r0[i], r1[i], r2[i], r3[i]
			c[i*f+i] += x0*x0 + x1*x1 + x2*x2 + x3*x3
			x = [8]float64{x0, x1, x2, x3, r0[i+1], r1[i+1], r2[i+1], r3[i+1]}
			kern.Pair4(c[i*f+i+1:i*f+f], c[(i+1)*f+i+1:(i+1)*f+f], r0[i+1:], r1[i+1:], r2[i+1:], r3[i+1:], f-i-1, &x)
		}
		if i < f {
			x0, x1, x2, x3 := r0[i], r1[i], r2[i], r3[i]
			c[i*f+i] += x0*x0 + x1*x1 + x2*x2 + x3*x3
		}
	}
	for ; q < a.Rows; q++ {
		r := a.Data[q*a.Stride : q*a.Stride+f]
		for i, x := range r {
			ci := c[i*f : (i+1)*f]
			for j := i; j < f; j++ {
				ci[j] += x * r[j]
			}
		}
	}
}
