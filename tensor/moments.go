package tensor

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
)

// chunkRows is the number of samples folded into one partial sum. It is a
// constant, not a function of the worker count, so the order of the
// floating-point reduction — and hence every result — does not depend on
// GOMAXPROCS (gonum's GEMM splits work by output block, never by the summed
// dimension).
const chunkRows = 4096

// Contraction names one slice of an empirical Hermite moment tensor:
//
//	M = (1/n) Σ_q S_q,Channel · He_r(z_q)(·, ·, Alpha, Beta)
//
// with order r = 4 when Beta is non-nil and r = 3 when Beta is nil. By
// Stein's identity, for weights s = Σ_j u_j·f(w_j·z) with unit w_j and
// z ~ N(0, I), its expectation is Σ_j c_r(f)·u_j·(w_j·α)(w_j·β)·w_j w_jᵀ:
// every slice is diagonalised by the same components.
type Contraction struct {
	Channel     int
	Alpha, Beta []float64
}

// HermiteSlices streams once over the rows of Z (n×k) in fixed chunks and
// returns the k×k slices of the empirical Hermite moments named by cs, with
// weights taken from the columns of S (n×p). It never forms a k^r array:
// each slice is one weighted Gram matrix Zᵀ·diag(w)·Z plus rank-two and
// identity corrections, and all of a chunk's Gram matrices come from a single
// GEMM. Cost ≈ 2·n·k²·(len(cs)+p) flops plus n·k·len(cs) for the weights.
// progress, if non-nil, is called after each chunk.
func HermiteSlices(ctx context.Context, Z, S *mat.Dense, cs []Contraction, progress func(done, total int)) ([]*mat.SymDense, error) {
	n, k := Z.Dims()
	ns, p := S.Dims()
	if ns != n {
		return nil, fmt.Errorf("tensor: %d samples but %d weights", n, ns)
	}
	if n == 0 || k == 0 || p == 0 || len(cs) == 0 {
		return nil, fmt.Errorf("tensor: empty input (n=%d, k=%d, channels=%d, slices=%d)", n, k, p, len(cs))
	}
	for i, c := range cs {
		if c.Channel < 0 || c.Channel >= p || len(c.Alpha) != k || (c.Beta != nil && len(c.Beta) != k) {
			return nil, fmt.Errorf("tensor: contraction %d does not fit k=%d and %d channels", i, k, p)
		}
	}
	nc := len(cs)
	h := &hermiteSums{k: k, nc: nc, p: p, cs: cs}
	// Weighted Gram blocks: nc for the contractions, then p plain ones
	// (E[s_t·zzᵀ], needed by the order-4 correction terms).
	h.blocks = nc + p
	// Vector terms: per contraction E[s·b·z] and E[s·a·z] (order 4) or E[s·z]
	// (order 3, via the channel's plain vector); per channel E[s_t·z].
	h.vecs = 2*nc + p
	h.gram = mat.NewDense(k, k*h.blocks, nil)
	h.vsum = mat.NewDense(k, h.vecs, nil)
	h.scal = make([]float64, nc+p) // E[s·a·b] (or E[s·a]) per contraction, E[s_t] per channel
	if err := h.accumulate(ctx, Z, S, progress); err != nil {
		return nil, err
	}
	inv := 1 / float64(n)
	h.gram.Scale(inv, h.gram)
	h.vsum.Scale(inv, h.vsum)
	for i := range h.scal {
		h.scal[i] *= inv
	}
	out := make([]*mat.SymDense, nc)
	for i := range cs {
		out[i] = h.slice(i)
	}
	return out, nil
}

// hermiteSums holds the sums HermiteSlices accumulates over the samples:
// the weighted Gram blocks (one per contraction, then one per channel),
// the vector terms and the scalar terms of the Hermite corrections.
type hermiteSums struct {
	k, nc, p     int
	cs           []Contraction
	blocks, vecs int
	gram, vsum   *mat.Dense
	scal         []float64
}

// accumulate streams over the rows of Z and S in chunks of chunkRows: per
// chunk, the weighted rows for every block and vector term, then one GEMM
// each for the Gram blocks and the vector terms, added to the sums in
// chunk order.
func (h *hermiteSums) accumulate(ctx context.Context, Z, S *mat.Dense, progress func(done, total int)) error {
	n, _ := Z.Dims()
	k, nc, p, blocks, vecs, cs, scal := h.k, h.nc, h.p, h.blocks, h.vecs, h.cs, h.scal
	rows := min(chunkRows, n)
	zt := mat.NewDense(k, rows, nil)
	wz := mat.NewDense(rows, k*blocks, nil)
	wv := mat.NewDense(rows, vecs, nil)
	part := mat.NewDense(k, k*blocks, nil)
	partv := mat.NewDense(k, vecs, nil)
	a := make([]float64, nc)
	bv := make([]float64, nc)
	chunks := (n + chunkRows - 1) / chunkRows
	for c := 0; c < chunks; c++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		lo, hi := c*chunkRows, min((c+1)*chunkRows, n)
		b := hi - lo
		ztb := zt.Slice(0, k, 0, b).(*mat.Dense)
		wzb := wz.Slice(0, b, 0, k*blocks).(*mat.Dense)
		wvb := wv.Slice(0, b, 0, vecs).(*mat.Dense)
		for q := 0; q < b; q++ {
			z := Z.RawRowView(lo + q)
			s := S.RawRowView(lo + q)
			for i := 0; i < k; i++ {
				zt.Set(i, q, z[i])
			}
			row := wzb.RawRowView(q)
			vrow := wvb.RawRowView(q)
			for i, cc := range cs {
				st := s[cc.Channel]
				a[i] = vec.Dot(z, cc.Alpha)
				w := st * a[i]
				if cc.Beta != nil {
					bv[i] = vec.Dot(z, cc.Beta)
					w *= bv[i]
					vrow[2*i] = st * bv[i]
					vrow[2*i+1] = st * a[i]
				}
				scal[i] += w
				dst := row[i*k : (i+1)*k]
				for j, zj := range z {
					dst[j] = w * zj
				}
			}
			for t := 0; t < p; t++ {
				st := s[t]
				scal[nc+t] += st
				vrow[2*nc+t] = st
				dst := row[(nc+t)*k : (nc+t+1)*k]
				for j, zj := range z {
					dst[j] = st * zj
				}
			}
		}
		part.Mul(ztb, wzb)
		h.gram.Add(h.gram, part)
		partv.Mul(ztb, wvb)
		h.vsum.Add(h.vsum, partv)
		if progress != nil {
			progress(c+1, chunks)
		}
	}
	return nil
}

// slice assembles contraction i's k×k slice from the (averaged) sums: its
// weighted Gram minus the Hermite corrections of order 3 (He_3) or 4
// (He_4).
func (h *hermiteSums) slice(i int) *mat.SymDense {
	k, nc, gram, vsum, scal := h.k, h.nc, h.gram, h.vsum, h.scal
	cc := h.cs[i]
	t := cc.Channel
	G := gram.Slice(0, k, i*k, (i+1)*k)
	M := mat.NewSymDense(k, nil)
	s0 := scal[nc+t]
	for x := 0; x < k; x++ {
		for y := x; y < k; y++ {
			var v float64
			g := (G.At(x, y) + G.At(y, x)) / 2
			if cc.Beta == nil {
				// He_3(z)(·,·,α) = (z·α)zzᵀ − (z·α)I − αzᵀ − zαᵀ.
				ez := vsum.At(x, 2*nc+t)
				ezy := vsum.At(y, 2*nc+t)
				v = g - cc.Alpha[x]*ezy - ez*cc.Alpha[y]
				if x == y {
					v -= scal[i]
				}
			} else {
				// He_4(z)(·,·,α,β) = ab·zzᵀ − ab·I − b(αzᵀ+zαᵀ) − a(βzᵀ+zβᵀ)
				//                    − (α·β)zzᵀ + (α·β)I + αβᵀ + βαᵀ, a = z·α, b = z·β.
				al, be := cc.Alpha, cc.Beta
				ab := vec.Dot(al, be)
				sbz := func(r int) float64 { return vsum.At(r, 2*i) }
				saz := func(r int) float64 { return vsum.At(r, 2*i+1) }
				plain := gram.Slice(0, k, (nc+t)*k, (nc+t+1)*k)
				szz := (plain.At(x, y) + plain.At(y, x)) / 2
				v = g - al[x]*sbz(y) - sbz(x)*al[y] - be[x]*saz(y) - saz(x)*be[y] -
					ab*szz + s0*(al[x]*be[y]+be[x]*al[y])
				if x == y {
					v += -scal[i] + ab*s0
				}
			}
			M.SetSym(x, y, v)
		}
	}
	return M
}

// HermiteMoment2 returns (1/n) Σ_q S_qt·(x_q x_qᵀ − I) for every column t of
// S, for samples of any dimension d (rows of X). Its expectation is
// Σ_j c_2(f)·u_tj·v_j v_jᵀ, whose column span is the span of the hidden
// weights: the order-2 step that reduces the dimension to k before any
// higher moment (the span step of the tensor start, docs/twolayer.md; the
// order-2 moment of [BJW19, Alg 4]'s whitening). Cost 2·n·d²·p flops.
func HermiteMoment2(ctx context.Context, X, S *mat.Dense, progress func(done, total int)) ([]*mat.SymDense, error) {
	n, d := X.Dims()
	ns, p := S.Dims()
	if ns != n {
		return nil, fmt.Errorf("tensor: %d samples but %d weights", n, ns)
	}
	if n == 0 || d == 0 || p == 0 {
		return nil, fmt.Errorf("tensor: empty input (n=%d, d=%d, channels=%d)", n, d, p)
	}
	acc := mat.NewDense(d, d*p, nil)
	sums := make([]float64, p)
	rows := min(chunkRows, n)
	xt := mat.NewDense(d, rows, nil)
	ws := mat.NewDense(rows, d*p, nil)
	part := mat.NewDense(d, d*p, nil)
	chunks := (n + chunkRows - 1) / chunkRows
	for c := 0; c < chunks; c++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lo, hi := c*chunkRows, min((c+1)*chunkRows, n)
		b := hi - lo
		for q := 0; q < b; q++ {
			x := X.RawRowView(lo + q)
			s := S.RawRowView(lo + q)
			for i, v := range x {
				xt.Set(i, q, v)
			}
			row := ws.RawRowView(q)
			for t, st := range s {
				sums[t] += st
				dst := row[t*d : (t+1)*d]
				for j, v := range x {
					dst[j] = st * v
				}
			}
		}
		part.Mul(xt.Slice(0, d, 0, b), ws.Slice(0, b, 0, d*p))
		acc.Add(acc, part)
		if progress != nil {
			progress(c+1, chunks)
		}
	}
	out := make([]*mat.SymDense, p)
	inv := 1 / float64(n)
	for t := 0; t < p; t++ {
		M := mat.NewSymDense(d, nil)
		for i := 0; i < d; i++ {
			for j := i; j < d; j++ {
				v := inv * (acc.At(i, t*d+j) + acc.At(j, t*d+i)) / 2
				if i == j {
					v -= inv * sums[t]
				}
				M.SetSym(i, j, v)
			}
		}
		out[t] = M
	}
	return out, nil
}
