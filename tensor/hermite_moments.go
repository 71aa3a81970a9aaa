package tensor

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/vec"
)

// MaxMomentOrder bounds the order HermiteMoments accepts.
const MaxMomentOrder = 12

// maxMomentGroups is the number of fixed sample ranges whose partial sums
// HermiteMoments adds in order. It is a constant, so the floating-point
// reduction order depends only on n, never on GOMAXPROCS.
const maxMomentGroups = 16

// HermiteMoments streams once over the rows of Z (n×k) and returns the
// empirical Hermite moments of every order r = 0…maxOrder for every weight
// column t of S (n×p), out[t][r] = (1/n)·Σ_q S_qt·He_r(z_q), as symmetric
// tensors (the estimator T̂_r of [ATV21, Lemma D.3]).
//
// It never evaluates an order-r entry per sample. Every sample gives the
// Hermite monomials h_α(z) = Π_j He_{α_j}(z_j) of degree ≤ ⌈R/2⌉ (R =
// maxOrder), one multiplication each from a parent monomial; one GEMM per
// chunk of 4096 samples accumulates the weighted Gram matrix
// G_t[α, β] = Σ_q s_qt·h_α(z_q)·h_β(z_q) (|β| ≤ ⌊R/2⌋). Entry γ of order r is
// read off G at a split γ = α + β (α the first ⌈r/2⌉ sorted indices) with
// the linearisation He_a·He_b = Σ_i i!·C(a,i)·C(b,i)·He_{a+b−2i}, whose lower
// terms come from orders already done. The features are orthogonal under
// the Gaussian, so little is lost to cancellation. Cost ≈ 2·n·F_L·F_R·p flops
// with F_L = C(k+⌈R/2⌉, k), F_R = C(k+⌊R/2⌋, k) (k = 5, R = 4: 1 764 flops
// per sample and channel, all orders 0…4 at once), at GEMM speed.
//
// Samples are split into at most 16 fixed ranges of whole chunks; the ranges
// run in parallel (internal/parallel) with local sums, which are added in
// range order, so the result is identical at any GOMAXPROCS. progress, if
// non-nil, is called after each chunk (serialised; done counts chunks).
func HermiteMoments(ctx context.Context, Z, S *mat.Dense, maxOrder int, progress func(done, total int)) ([][]*Symmetric, error) {
	n, k := Z.Dims()
	ns, p := S.Dims()
	if ns != n {
		return nil, fmt.Errorf("tensor: %d samples but %d weights", n, ns)
	}
	if n == 0 || k == 0 || p == 0 {
		return nil, fmt.Errorf("tensor: empty input (n=%d, k=%d, channels=%d)", n, k, p)
	}
	if maxOrder < 0 || maxOrder > MaxMomentOrder {
		return nil, fmt.Errorf("tensor: moment order %d outside [0, %d]", maxOrder, MaxMomentOrder)
	}
	plan := newMomentPlan(k, maxOrder)
	fl, fr := len(plan.feats), plan.nRight
	chunks := (n + chunkRows - 1) / chunkRows
	groups := min(chunks, maxMomentGroups)
	partial := make([][]float64, groups) // fl × (fr·p), row-major
	workers := runtime.GOMAXPROCS(0)
	type scratch struct {
		he        []float64 // k·(DL+1) rows of b: He_n(z_qj) at row j·(DL+1)+n
		col       []float64 // one column of Z or S
		left, rgt []float64 // fl×b and (fr·p)×b, column q = sample q
	}
	scr := make([]*scratch, workers)

	var mu sync.Mutex
	done := 0
	parallel.For(groups, func(w, g int) {
		if scr[w] == nil {
			scr[w] = &scratch{
				he:   make([]float64, k*(plan.degL+1)*chunkRows),
				col:  make([]float64, chunkRows),
				left: make([]float64, fl*chunkRows),
				rgt:  make([]float64, fr*p*chunkRows),
			}
		}
		sc := scr[w]
		acc := make([]float64, fl*fr*p)
		partial[g] = acc
		c0, c1 := g*chunks/groups, (g+1)*chunks/groups
		for c := c0; c < c1; c++ {
			if ctx.Err() != nil {
				return
			}
			lo, hi := c*chunkRows, min((c+1)*chunkRows, n)
			b := hi - lo
			plan.features(Z, S, lo, b, sc.he, sc.col, sc.left, sc.rgt)
			// acc += left·rgtᵀ: (fl×b)·(b×fr·p).
			blas64.Gemm(blas.NoTrans, blas.Trans, 1,
				blas64.General{Rows: fl, Cols: b, Stride: b, Data: sc.left[:fl*b]},
				blas64.General{Rows: fr * p, Cols: b, Stride: b, Data: sc.rgt[:fr*p*b]},
				1, blas64.General{Rows: fl, Cols: fr * p, Stride: fr * p, Data: acc})
			if progress != nil {
				mu.Lock()
				done++
				progress(done, chunks)
				mu.Unlock()
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	G := make([]float64, fl*fr*p)
	for _, acc := range partial {
		for i, v := range acc {
			G[i] += v
		}
	}
	inv := 1 / float64(n)
	for i := range G {
		G[i] *= inv
	}
	out := make([][]*Symmetric, p)
	for t := 0; t < p; t++ {
		out[t] = plan.assemble(G, t, p)
	}
	return out, nil
}

// momentPlan is the feature layout of HermiteMoments for one (k, maxOrder).
type momentPlan struct {
	k, maxOrder int
	degL        int
	// feats lists the sorted multi-indices of degree 0…degL, by degree then
	// lexicographically; the first nRight are those of degree ≤ ⌊R/2⌋.
	feats  [][]int
	nRight int
	// degOffset[r] is the position of the first feature of degree r.
	degOffset []int
	// parent[f], coord[f], power[f]: h_f = h_parent·He_power(z_coord).
	parent, coord, power []int
}

func newMomentPlan(k, maxOrder int) *momentPlan {
	pl := &momentPlan{k: k, maxOrder: maxOrder, degL: (maxOrder + 1) / 2}
	degR := maxOrder / 2
	for r := 0; r <= pl.degL; r++ {
		pl.degOffset = append(pl.degOffset, len(pl.feats))
		forEachSorted(k, r, func(_ int, idx []int) {
			pl.feats = append(pl.feats, append([]int(nil), idx...))
		})
		if r == degR {
			pl.nRight = len(pl.feats)
		}
	}
	pl.parent = make([]int, len(pl.feats))
	pl.coord = make([]int, len(pl.feats))
	pl.power = make([]int, len(pl.feats))
	for f, a := range pl.feats {
		if len(a) == 0 {
			pl.parent[f] = -1
			continue
		}
		j := a[len(a)-1]
		run := 0
		for run < len(a) && a[len(a)-1-run] == j {
			run++
		}
		pl.parent[f] = pl.featIndex(a[:len(a)-run])
		pl.coord[f], pl.power[f] = j, run
	}
	return pl
}

// featIndex returns the feature position of a sorted multi-index.
func (pl *momentPlan) featIndex(a []int) int {
	if len(a) == 0 {
		return 0
	}
	return pl.degOffset[len(a)] + (&Symmetric{Dim: pl.k, Order: len(a)}).index().rank(a)
}

// features fills, for samples lo…lo+b−1, the left features (fl rows of
// length b) and the weighted right features ((fr·p) rows of length b). Every
// loop runs over samples, contiguous in memory: feature f is its parent row
// times one row of univariate Hermite values.
func (pl *momentPlan) features(Z, S *mat.Dense, lo, b int, he, col, left, rgt []float64) {
	dl := pl.degL
	for j := 0; j < pl.k; j++ {
		for q := 0; q < b; q++ {
			col[q] = Z.At(lo+q, j)
		}
		base := j * (dl + 1) * b
		h0 := he[base : base+b]
		for q := range h0 {
			h0[q] = 1
		}
		if dl >= 1 {
			copy(he[base+b:base+2*b], col[:b])
		}
		for nn := 1; nn < dl; nn++ {
			hm, h, hp := he[base+(nn-1)*b:base+nn*b], he[base+nn*b:base+(nn+1)*b], he[base+(nn+1)*b:base+(nn+2)*b]
			fn := float64(nn)
			for q := range hp {
				hp[q] = col[q]*h[q] - fn*hm[q]
			}
		}
	}
	row0 := left[:b]
	for q := range row0 {
		row0[q] = 1
	}
	for f := 1; f < len(pl.feats); f++ {
		dst := left[f*b : (f+1)*b]
		par := left[pl.parent[f]*b : (pl.parent[f]+1)*b]
		hr := pl.coord[f]*(dl+1) + pl.power[f]
		fac := he[hr*b : (hr+1)*b]
		for q := range dst {
			dst[q] = par[q] * fac[q]
		}
	}
	_, p := S.Dims()
	fr := pl.nRight
	for t := 0; t < p; t++ {
		for q := 0; q < b; q++ {
			col[q] = S.At(lo+q, t)
		}
		for f := 0; f < fr; f++ {
			dst := rgt[(t*fr+f)*b : (t*fr+f+1)*b]
			src := left[f*b : (f+1)*b]
			for q := range dst {
				dst[q] = col[q] * src[q]
			}
		}
	}
}

// assemble turns the Gram matrix G (fl × fr·p, already averaged) into the
// moments of channel t.
func (pl *momentPlan) assemble(G []float64, t, p int) []*Symmetric {
	fr := pl.nRight
	stride := fr * p
	out := make([]*Symmetric, pl.maxOrder+1)
	for r := 0; r <= pl.maxOrder; r++ {
		T := NewSymmetric(pl.k, r)
		ha := (r + 1) / 2
		T.ForEach(func(pos int, g []int) {
			a, b := g[:ha], g[ha:]
			v := G[pl.featIndex(a)*stride+t*fr+pl.featIndex(b)]
			if len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[0] {
				j := b[0]
				na, nb := 0, 0
				for na < len(a) && a[len(a)-1-na] == j {
					na++
				}
				for nb < len(b) && b[nb] == j {
					nb++
				}
				// h_a·h_b = Σ_i i!·C(na,i)·C(nb,i)·h_{g − 2i·e_j}.
				lower := make([]int, 0, r)
				for i := 1; i <= min(na, nb); i++ {
					lower = lower[:0]
					lower = append(lower, a[:len(a)-na]...)
					for c := 0; c < na+nb-2*i; c++ {
						lower = append(lower, j)
					}
					lower = append(lower, b[nb:]...)
					v -= linCoeff(na, nb, i) * out[r-2*i].At(lower...)
				}
			}
			T.Data[pos] = v
		})
		out[r] = T
	}
	return out
}

// linCoeff is i!·C(a,i)·C(b,i), the coefficient of He_{a+b−2i} in He_a·He_b.
func linCoeff(a, b, i int) float64 {
	c := 1.0
	for l := 0; l < i; l++ {
		c *= float64((a-l)*(b-l)) / float64(l+1)
	}
	return c
}

// DirectionalMoment returns (1/n)·Σ_q s_q·He_r(u·z_q) for a unit vector u:
// the full contraction T̂_r(u, …, u) of the empirical Hermite moment, in
// O(n·k) time without any tensor (⟨He_r(z), u^{⊗r}⟩ = He_r(u·z) for unit u;
// the tensor-free right-hand side of RecoverScalars). It sums fixed chunks
// in order, so it is deterministic.
func DirectionalMoment(Z *mat.Dense, s []float64, u []float64, r int) float64 {
	n, k := Z.Dims()
	if len(s) != n || len(u) != k {
		panic(fmt.Sprintf("tensor: DirectionalMoment with %d weights and a direction of length %d for %d×%d samples", len(s), len(u), n, k))
	}
	he := make([]float64, r+1)
	total := 0.0
	for lo := 0; lo < n; lo += chunkRows {
		hi := min(lo+chunkRows, n)
		part := 0.0
		for q := lo; q < hi; q++ {
			x := vec.Dot(Z.RawRowView(q), u)
			part += s[q] * hermiteTable(x, r, he)[r]
		}
		total += part
	}
	if n == 0 {
		return math.NaN()
	}
	return total / float64(n)
}
