package linalg

import (
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"

	"github.com/relurec/relurec/internal/parallel"
)

// tallQR is a tall-skinny QR factorization (TSQR, Demmel et al. 2012) of an
// r×c matrix with r ≥ c: the rows are cut into fixed blocks, each block is
// factorized on its own, and the stacked c×c R factors are factorized again
// (recursively). Q is never formed; it is applied through the stored
// Householder reflectors.
//
// Why not one LAPACK Geqrf: gonum's Geqrf falls back to the unblocked,
// memory-bound algorithm when c < 128, sweeping the whole r×c matrix once per
// column. Blocks of about 1 MiB stay in cache and run on all cores, which made
// ThinSVD of a 200000×50 matrix ~2.5× faster than mat.SVD on 2 cores while
// keeping Householder QR's backward stability.
// The blocking depends only on (r, c), never on GOMAXPROCS, so results are
// bit-for-bit reproducible on any machine with the same gonum.
type tallQR struct {
	rows, cols int
	blocks     []qrBlock
	top        *tallQR   // QR of the stacked block R factors; nil with one block
	data       []float64 // backing store of all blocks' reflectors, r×c row-major
	// src is the factorized matrix of a lean factorization (newLeanQR),
	// which keeps no leaf reflectors (blocks[i].a has no data) and
	// recomputes them from src when Q is applied; nil otherwise.
	src *blas64.General
}

// qrBlock holds the compact Householder QR (Geqrf output) of rows
// [start, start+a.Rows) of the matrix.
type qrBlock struct {
	start int
	a     blas64.General
	tau   []float64
}

// leafBytes is the target size of one block: small enough for a per-core L2
// cache, large enough that the per-block overhead is negligible.
const leafBytes = 1 << 20

// blockRows is the number of rows per block for c columns; at least 2c so
// that the stacked R factors (c rows per block) are at most half as tall as
// the input, which makes the recursion terminate.
func blockRows(c int) int {
	return max(leafBytes/(8*c), 2*c)
}

// geqrf factorizes a in place and returns tau.
func geqrf(a blas64.General) []float64 {
	tau := make([]float64, min(a.Rows, a.Cols))
	work := []float64{0}
	lapack64.Geqrf(a, tau, work, -1)
	work = make([]float64, max(1, int(work[0])))
	lapack64.Geqrf(a, tau, work, len(work))
	return tau
}

// ormqr overwrites c with Q·c (trans == blas.NoTrans) or Qᵀ·c.
func ormqr(trans blas.Transpose, a blas64.General, tau []float64, c blas64.General) {
	work := []float64{0}
	lapack64.Ormqr(blas.Left, trans, a, tau, c, work, -1)
	work = make([]float64, max(1, int(work[0])))
	lapack64.Ormqr(blas.Left, trans, a, tau, c, work, len(work))
}

// newTallQR factorizes src (r×c, r ≥ c), which is not modified. The
// reflectors are stored in one r×c row-major buffer (block i occupies its
// own rows), so that qInPlace can later overwrite that buffer with Q·w
// without a second r×c allocation.
func newTallQR(src blas64.General) *tallQR {
	r, c := src.Rows, src.Cols
	b := blockRows(c)
	nb := max(1, r/b) // the last block takes the remainder, so every block has ≥ b ≥ 2c rows (or all r rows)
	t := &tallQR{rows: r, cols: c, blocks: make([]qrBlock, nb), data: make([]float64, r*c)}
	parallel.For(nb, func(_, i int) {
		start := i * b
		n := b
		if i == nb-1 {
			n = r - start
		}
		a := blas64.General{Rows: n, Cols: c, Stride: c, Data: t.data[start*c : (start+n)*c]}
		if src.Stride == c {
			copy(a.Data, src.Data[start*c:(start+n)*c])
		} else {
			for j := 0; j < n; j++ {
				copy(a.Data[j*c:(j+1)*c], src.Data[(start+j)*src.Stride:(start+j)*src.Stride+c])
			}
		}
		t.blocks[i] = qrBlock{start: start, a: a, tau: geqrf(a)}
	})
	if nb == 1 {
		return t
	}
	stacked := blas64.General{Rows: nb * c, Cols: c, Stride: c, Data: make([]float64, nb*c*c)}
	for i, blk := range t.blocks {
		for p := 0; p < c; p++ {
			copy(stacked.Data[(i*c+p)*c+p:(i*c+p+1)*c], blk.a.Data[p*c+p:(p+1)*c])
		}
	}
	t.top = newTallQR(stacked)
	return t
}

// newLeanQR factorizes src (r×c, r ≥ c) like newTallQR, but keeps only
// the stacked R factors of the leaf blocks, not their reflectors: a leaf is
// factorized in a per-worker scratch buffer of about leafBytes and
// factorized again, from src, whenever Q is applied (qCols, applyQT). The
// leaves' Geqrf is deterministic, so the reflectors and every result are
// bit-for-bit those of newTallQR; the cost is one more pass over src per
// application of Q, the saving an r×c buffer. src must not change while
// the factorization is in use. With one block (r < 2·blockRows(c)) the
// leaf is kept, as it is no bigger than the scratch.
func newLeanQR(src blas64.General) *tallQR {
	t := &tallQR{rows: src.Rows, cols: src.Cols}
	if t.oneBlock() {
		return newTallQR(src)
	}
	t.src = &src
	nb := t.numBlocks()
	t.blocks = make([]qrBlock, nb)
	c := t.cols
	stacked := blas64.General{Rows: nb * c, Cols: c, Stride: c, Data: make([]float64, nb*c*c)}
	scratch := make([][]float64, runtime.GOMAXPROCS(0))
	parallel.For(nb, func(wk, i int) {
		a, tau := t.leaf(i, &scratch[wk])
		t.blocks[i] = qrBlock{start: i * blockRows(c), a: blas64.General{Rows: a.Rows, Cols: c, Stride: c}, tau: tau}
		for p := 0; p < c; p++ {
			copy(stacked.Data[(i*c+p)*c+p:(i*c+p+1)*c], a.Data[p*c+p:(p+1)*c])
		}
	})
	t.top = newTallQR(stacked)
	return t
}

// numBlocks is the number of leaf blocks: the last block takes the
// remainder, so every block has ≥ blockRows(c) ≥ 2c rows (or all r rows).
func (t *tallQR) numBlocks() int { return max(1, t.rows/blockRows(t.cols)) }

func (t *tallQR) oneBlock() bool { return t.numBlocks() == 1 }

// leaf copies leaf block i of src into *buf (grown as needed) and
// factorizes it there, returning the block's compact QR and tau.
func (t *tallQR) leaf(i int, buf *[]float64) (blas64.General, []float64) {
	src, c := *t.src, t.cols
	b := blockRows(c)
	start, n := i*b, b
	if i == t.numBlocks()-1 {
		n = t.rows - start
	}
	if cap(*buf) < n*c {
		*buf = make([]float64, n*c)
	}
	a := blas64.General{Rows: n, Cols: c, Stride: c, Data: (*buf)[:n*c]}
	if src.Stride == c {
		copy(a.Data, src.Data[start*c:(start+n)*c])
	} else {
		for j := 0; j < n; j++ {
			copy(a.Data[j*c:(j+1)*c], src.Data[(start+j)*src.Stride:(start+j)*src.Stride+c])
		}
	}
	return a, geqrf(a)
}

// qCols returns the first q columns of Q·w as an r×q row-major slice,
// where Q is the r×c thin orthonormal factor and w is c×c: for q < c, the
// leading columns of what qInPlace returns, bit for bit (Q is applied to
// each column on its own), without an r×c buffer. t is not modified. The
// result goes into out (len ≥ r·q, overwritten) when out is not nil.
func (t *tallQR) qCols(w blas64.General, q int, out []float64) []float64 {
	c := t.cols
	if out == nil {
		out = make([]float64, t.rows*q)
	}
	out = out[:t.rows*q]
	var mid []float64 // c rows per block: the upper levels' Q applied to w
	if t.top != nil {
		mid = t.top.qCols(w, c, nil)
	}
	refls := make([][]float64, runtime.GOMAXPROCS(0))
	parallel.For(len(t.blocks), func(wk, i int) {
		blk := t.blocks[i]
		var refl blas64.General
		if t.src != nil {
			refl, _ = t.leaf(i, &refls[wk])
		} else {
			refls[wk] = append(refls[wk][:0], blk.a.Data...)
			refl = blas64.General{Rows: blk.a.Rows, Cols: c, Stride: c, Data: refls[wk]}
		}
		d := blas64.General{Rows: blk.a.Rows, Cols: q, Stride: q, Data: out[blk.start*q : (blk.start+blk.a.Rows)*q]}
		for j := 0; j < c; j++ {
			if mid != nil {
				copy(d.Data[j*q:(j+1)*q], mid[(i*c+j)*c:(i*c+j)*c+q])
			} else {
				copy(d.Data[j*q:(j+1)*q], w.Data[j*w.Stride:j*w.Stride+q])
			}
		}
		clear(d.Data[c*q:]) // [w_i; 0]: out may hold another matrix's entries
		ormqr(blas.NoTrans, refl, blk.tau, d)
	})
	return out
}

// r returns the c×c upper triangular factor (zeros below the diagonal).
func (t *tallQR) r() blas64.General {
	if t.top != nil {
		return t.top.r()
	}
	c := t.cols
	out := blas64.General{Rows: c, Cols: c, Stride: c, Data: make([]float64, c*c)}
	a := t.blocks[0].a
	for p := 0; p < c; p++ {
		copy(out.Data[p*c+p:(p+1)*c], a.Data[p*a.Stride+p:p*a.Stride+c])
	}
	return out
}

// qInPlace returns Q·w as an r×c row-major slice, where Q is the r×c thin
// orthonormal factor and w is c×c. It overwrites the stored reflectors (each
// block's reflectors are first copied to a cache-sized scratch buffer), so t
// must not be used afterwards; this saves a second r×c buffer, and with it
// half the memory traffic of the most expensive step.
func (t *tallQR) qInPlace(w blas64.General) []float64 {
	c := t.cols
	var mid []float64 // c rows per block: the upper levels' Q applied to w
	if t.top != nil {
		mid = t.top.qInPlace(w)
	}
	scratch := make([][]float64, runtime.GOMAXPROCS(0))
	parallel.For(len(t.blocks), func(wk, i int) {
		blk := t.blocks[i]
		scratch[wk] = append(scratch[wk][:0], blk.a.Data...)
		refl := blas64.General{Rows: blk.a.Rows, Cols: c, Stride: c, Data: scratch[wk]}
		d := blk.a // overwritten with [w_i; 0], then with Q_i·[w_i; 0]
		if mid != nil {
			copy(d.Data[:c*c], mid[i*c*c:(i+1)*c*c])
		} else {
			for j := 0; j < c; j++ {
				copy(d.Data[j*c:(j+1)*c], w.Data[j*w.Stride:j*w.Stride+c])
			}
		}
		clear(d.Data[c*c:])
		ormqr(blas.NoTrans, refl, blk.tau, d)
	})
	t.blocks = nil
	return t.data
}

// applyQT returns the first c rows of Qᵀ·b for an r×q matrix b (not
// modified): the coefficients of b's columns in the basis Q.
func (t *tallQR) applyQT(b blas64.General) blas64.General {
	c, q := t.cols, b.Cols
	stacked := blas64.General{Rows: len(t.blocks) * c, Cols: q, Stride: q, Data: make([]float64, len(t.blocks)*c*q)}
	// Per-worker buffers: a block's copy of b, and a lean factorization's
	// recomputed reflectors.
	tmps := make([][]float64, runtime.GOMAXPROCS(0))
	refls := make([][]float64, runtime.GOMAXPROCS(0))
	parallel.For(len(t.blocks), func(wk, i int) {
		blk := t.blocks[i]
		refl := blk.a
		if t.src != nil {
			refl, _ = t.leaf(i, &refls[wk])
		}
		n := blk.a.Rows
		if cap(tmps[wk]) < n*q {
			tmps[wk] = make([]float64, n*q)
		}
		tmp := blas64.General{Rows: n, Cols: q, Stride: q, Data: tmps[wk][:n*q]}
		for j := 0; j < n; j++ {
			copy(tmp.Data[j*q:(j+1)*q], b.Data[(blk.start+j)*b.Stride:(blk.start+j)*b.Stride+q])
		}
		ormqr(blas.Trans, refl, blk.tau, tmp)
		copy(stacked.Data[i*c*q:(i+1)*c*q], tmp.Data[:c*q])
	})
	if t.top == nil {
		return stacked
	}
	return t.top.applyQT(stacked)
}
