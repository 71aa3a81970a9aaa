package twolayer

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/outer"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/tensor"
)

// hermiteSlices is tensor.HermiteSlices for the tensor start's weights: the
// k×k slices named by cs of the empirical order-r Hermite moments of the
// rows z of mo.z, with weight channels s_t = red·θ_t for the columns θ_t of
// thetas (k×p) and red = mo.red. It computes the same sums in fewer flops:
//
//   - every weighted Gram Σ_q w_q·z_q z_qᵀ is read off the k(k+1)/2
//     quadratic monomials z_a·z_b (its upper triangle), and all of a chunk's
//     contractions come from one sum of outer products [w]ᵀ·[1, z_a·z_b]
//     (internal/outer: no GEMM over both triangles, no transposed copy);
//   - the per-channel sums the order-r corrections need (E[s_t], E[s_t·z],
//     E[s_t·zzᵀ]) are linear in s_t = red·θ_t, so they are combined from the
//     k sums Σ_q red_qc·[1, z_a·z_b, z] that every pass shares (computed in
//     the first pass, kept in mo), instead of one Gram block per channel and
//     pass.
//
// At k = 20 and 2k = 40 slices that is 2·(40·211 + 80·20) flops per sample
// in the first pass instead of 2·20²·(40 + 40) + …, about 5× fewer; the
// aligned passes gain alike. Sums run over linalg.GramChunk-row chunks in
// fixed groups added in order (the same bits at any GOMAXPROCS).
func (mo *startMoments) hermiteSlices(ctx context.Context, thetas *mat.Dense, cs []tensor.Contraction, progress func(done, total int)) ([]*mat.SymDense, error) {
	h, err := newSlicePass(mo, thetas, cs)
	if err != nil {
		return nil, err
	}
	if progress != nil {
		progress(0, 1)
	}
	n, _ := mo.red.Dims()
	bufs := make([]*sliceScratch, maxProcs())
	acc, err := groupSums(ctx, n, h.size, func(wk int, acc []float64, lo, hi int) {
		b := bufs[wk]
		if b == nil {
			chunk := linalg.GramChunk
			b = &sliceScratch{q: make([]float64, chunk*h.fq), w: make([]float64, chunk*h.nc), v: make([]float64, chunk*h.nv), s: make([]float64, chunk*h.p), a: make([]float64, chunk*h.na)}
			bufs[wk] = b
		}
		h.addChunk(b, acc, lo, hi)
	})
	if err != nil {
		return nil, err
	}
	mo.pending = nil
	h.inv = 1 / float64(n)
	if h.base {
		mo.base = make([]float64, h.k*h.fq)
		for i, v := range acc[h.sizeW+h.sizeV:] {
			mo.base[i] = h.inv * v
		}
	}
	out := make([]*mat.SymDense, h.nc)
	for i := range cs {
		out[i] = h.slice(acc, i)
	}
	if progress != nil {
		progress(1, 1)
	}
	return out, nil
}

// slicePass holds the layout of one hermiteSlices pass: the shapes of its
// accumulator, the contraction vectors and the moments it reads.
type slicePass struct {
	mo *startMoments
	cs []tensor.Contraction
	// th and rr are the raw thetas (k×p) and red (n×k).
	th, rr blas64.General
	// pending is the residualisation the first pass finishes (buildMoments).
	pending  *residualizer
	k, p, nc int
	order4   bool
	// kk is the number of quadratic monomials z_a·z_b (a ≤ b); fq the
	// per-sample features [1, z_a·z_b, z].
	kk, fq int
	// nv is the number of vector weights per sample: s·b and s·a per
	// contraction (order 4).
	nv int
	// base marks the first pass, which also sums the channel base.
	base bool
	// Accumulator: contraction sums [w]ᵀ·[1, zz] (sizeW = nc×(1+kk)),
	// vector sums [s·b, s·a]ᵀ·z (sizeV = nv×k), then, in the first pass,
	// the channel base redᵀ·[1, zz, z] (k×fq).
	sizeW, sizeV, size int
	// ab holds the contraction vectors as columns, [α_i, β_i] (or α_i), so
	// that a row z gives every z·α_i and z·β_i in one pass; na columns.
	ab []float64
	na int
	// inv is 1/n, set once the sums are done.
	inv float64
}

// sliceScratch is a worker's scratch for slicePass.addChunk.
type sliceScratch struct {
	q, w, v, s, a, z []float64
	res              residScratch
}

// newSlicePass checks that the contractions cs fit the start's k and the p
// channels of thetas, and lays out the pass's accumulator and contraction
// vectors.
func newSlicePass(mo *startMoments, thetas *mat.Dense, cs []tensor.Contraction) (*slicePass, error) {
	k := mo.k()
	_, p := thetas.Dims()
	nc := len(cs)
	order4 := nc > 0 && cs[0].Beta != nil
	for i, c := range cs {
		if c.Channel < 0 || c.Channel >= p || len(c.Alpha) != k || (c.Beta != nil) != order4 || (order4 && len(c.Beta) != k) {
			return nil, fmt.Errorf("twolayer: contraction %d does not fit k=%d and %d channels", i, k, p)
		}
	}
	h := &slicePass{mo: mo, cs: cs, th: thetas.RawMatrix(), rr: mo.red.RawMatrix(), pending: mo.pending, k: k, p: p, nc: nc, order4: order4}
	h.kk = k * (k + 1) / 2
	h.fq = 1 + h.kk + k // per sample [1, z_a·z_b for a ≤ b, z]
	h.base = mo.base == nil
	if order4 {
		h.nv = 2 * nc
	}
	h.sizeW, h.sizeV = nc*(1+h.kk), h.nv*k
	h.size = h.sizeW + h.sizeV
	if h.base {
		h.size += k * h.fq
	}
	h.na = nc
	if order4 {
		h.na = 2 * nc
	}
	na := h.na
	h.ab = make([]float64, k*na)
	for i, c := range cs {
		for x := 0; x < k; x++ {
			if order4 {
				h.ab[x*na+2*i], h.ab[x*na+2*i+1] = c.Alpha[x], c.Beta[x]
			} else {
				h.ab[x*na+i] = c.Alpha[x]
			}
		}
	}
	return h, nil
}

// addChunk adds rows lo..hi to acc: each row's monomials [1, z_a·z_b, z]
// and contraction weights, then the chunk's sums of outer products
// (internal/outer).
func (h *slicePass) addChunk(b *sliceScratch, acc []float64, lo, hi int) {
	k, p, nc, kk, fq, nv, na := h.k, h.p, h.nc, h.kk, h.fq, h.nv, h.na
	red, rr, th := h.mo.red, h.rr, h.th
	rows := hi - lo
	Z := h.mo.zRows(lo, hi, &b.z)
	if h.pending != nil {
		// The first pass finishes red's residualisation on its chunk
		// before reading it (buildMoments).
		h.pending.apply(Z, red, lo, &b.res)
	}
	// The channel weights s = red·θ and the contractions z·α, z·β of
	// the chunk's rows (each entry kern.RowTimes's sum).
	kern.MulRows(b.s, p, rr.Data[lo*rr.Stride:], rr.Stride, th.Data, th.Stride, rows, k, p)
	kern.MulRows(b.a, na, Z.Data, Z.Stride, h.ab, na, rows, k, na)
	for q := lo; q < hi; q++ {
		z := Z.Data[(q-lo)*Z.Stride : (q-lo)*Z.Stride+k]
		qr := b.q[(q-lo)*fq : (q-lo+1)*fq]
		qr[0] = 1
		copy(qr[1+kk:], z)
		at := 1
		for a := 0; a < k; a++ {
			za := z[a]
			for _, zb := range z[a:] {
				qr[at] = za * zb
				at++
			}
		}
		s, za := b.s[(q-lo)*p:(q-lo+1)*p], b.a[(q-lo)*na:(q-lo+1)*na]
		wr := b.w[(q-lo)*nc : (q-lo+1)*nc]
		vr := b.v[(q-lo)*nv : (q-lo+1)*nv]
		for i, c := range h.cs {
			st := s[c.Channel]
			if h.order4 {
				a, bb := za[2*i], za[2*i+1]
				wr[i] = st * a * bb
				vr[2*i] = st * bb
				vr[2*i+1] = st * a
			} else {
				wr[i] = st * za[i]
			}
		}
	}
	sizeW, sizeV := h.sizeW, h.sizeV
	outer.Add(acc[:sizeW], blas64.General{Rows: rows, Cols: nc, Stride: nc, Data: b.w}, blas64.General{Rows: rows, Cols: 1 + kk, Stride: fq, Data: b.q})
	if nv > 0 {
		outer.Add(acc[sizeW:sizeW+sizeV], blas64.General{Rows: rows, Cols: nv, Stride: nv, Data: b.v}, Z)
	}
	if h.base {
		outer.Add(acc[sizeW+sizeV:], rowsOf(red, lo, hi), blas64.General{Rows: rows, Cols: fq, Stride: fq, Data: b.q})
	}
}

// monomial maps a ≤ b (in either order) to the position of z_a·z_b among
// the quadratic monomials.
func (h *slicePass) monomial(a, b int) int {
	if a > b {
		a, b = b, a
	}
	return a*h.k - a*(a-1)/2 + (b - a)
}

// comb is the channel sum E[s_t·[1, zz, z]_col], combined from the base.
func (h *slicePass) comb(t, col int) float64 {
	v := 0.0
	for c := 0; c < h.k; c++ {
		v += h.th.Data[c*h.th.Stride+t] * h.mo.base[c*h.fq+col]
	}
	return v
}

// slice assembles contraction i's k×k slice from the sums acc: its
// weighted Gram minus the Hermite corrections of order 4 (He_4) or 3
// (He_3).
func (h *slicePass) slice(acc []float64, i int) *mat.SymDense {
	k, kk, inv, sizeW := h.k, h.kk, h.inv, h.sizeW
	idx, comb := h.monomial, h.comb
	cc := h.cs[i]
	t := cc.Channel
	wrow := acc[i*(1+kk) : (i+1)*(1+kk)]
	scal := inv * wrow[0]
	M := mat.NewSymDense(k, nil)
	if h.order4 {
		al, be := cc.Alpha, cc.Beta
		ab := dot(al, be)
		sbz := acc[sizeW+2*i*k : sizeW+(2*i+1)*k]
		saz := acc[sizeW+(2*i+1)*k : sizeW+(2*i+2)*k]
		s0 := comb(t, 0)
		for x := 0; x < k; x++ {
			for y := x; y < k; y++ {
				g := inv * wrow[1+idx(x, y)]
				szz := comb(t, 1+idx(x, y))
				// He_4(z)(·,·,α,β) = ab·zzᵀ − ab·I − b(αzᵀ+zαᵀ) − a(βzᵀ+zβᵀ)
				//                    − (α·β)zzᵀ + (α·β)I + αβᵀ + βαᵀ, a = z·α, b = z·β.
				v := g - inv*(al[x]*sbz[y]+sbz[x]*al[y]+be[x]*saz[y]+saz[x]*be[y]) -
					ab*szz + s0*(al[x]*be[y]+be[x]*al[y])
				if x == y {
					v += -scal + ab*s0
				}
				M.SetSym(x, y, v)
			}
		}
		return M
	}
	al := cc.Alpha
	for x := 0; x < k; x++ {
		for y := x; y < k; y++ {
			// He_3(z)(·,·,α) = (z·α)zzᵀ − (z·α)I − αzᵀ − zαᵀ.
			v := inv*wrow[1+idx(x, y)] - al[x]*comb(t, 1+kk+y) - comb(t, 1+kk+x)*al[y]
			if x == y {
				v -= scal
			}
			M.SetSym(x, y, v)
		}
	}
	return M
}
