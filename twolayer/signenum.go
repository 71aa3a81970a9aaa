package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/bits"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// The enumeration of Lemma 1 of [BJW19]: the candidate sign patterns of
// every k-subset system, and the work estimate of the worst-case route.

// EnumerateSignPatterns returns the candidate sign patterns of Lemma 1
// ([BJW19, Lemma 1], "P0") for an n×k basis B of full column rank: for every
// k-subset I of the rows and every right-hand side b ∈ {0,1}^k, it solves
// B_I·w = b and records sign(B·w). Every non-empty polyhedron
// {w : (Bw)_j ≥ 1 on S, ≤ 0 off S} has a vertex, fixed by k tight independent
// constraints, so 𝒮 contains every pattern S for which some vector of col(B)
// is ≥ 1 on S and ≤ 0 elsewhere — in particular sign(X·v*_i) of every hidden
// unit when B spans col(Y), Y = ReLU(XV*ᵀ)U*ᵀ of rank k. |𝒮| ≤ C(2n,k) + 1.
//
// Cost: C(n,k) subsets, each a k×k inversion, an n×k product and 2^k − 1
// pattern reads of n entries — Θ(C(n,k)·n·2^k). Exponential in k: use it for
// k ≤ 3–4 and n up to a few dozen.
func EnumerateSignPatterns(ctx context.Context, B *mat.Dense, opt PatternOptions) (*PatternSet, error) {
	if B == nil {
		return nil, fmt.Errorf("%w: the basis B is nil", ErrInput)
	}
	n, k := B.Dims()
	if k < 1 || n < k {
		return nil, fmt.Errorf("%w: the basis is %d×%d; it needs n ≥ k ≥ 1 (one row per sample, one column per hidden unit)", ErrInput, n, k)
	}
	if k > 16 {
		return nil, fmt.Errorf("%w: k = %d: sign-pattern enumeration needs C(n,k)·2^k systems and is only meant for k ≤ ~4", ErrInput, k)
	}
	for _, v := range B.RawMatrix().Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: the basis has a non-finite entry", ErrInput)
		}
	}
	if opt.SignTol <= 0 {
		opt.SignTol = 1e-9
	}
	if opt.CondMax <= 0 {
		opt.CondMax = 1e12
	}
	e := newEnumerator(B, opt)
	total := binomInt(n, k)
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for done := 0; ; done++ {
		if done&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if opt.Progress != nil {
				opt.Progress(done, total)
			}
		}
		e.subset(idx)
		if !nextCombination(idx, n) {
			break
		}
	}
	if opt.Progress != nil {
		opt.Progress(total, total)
	}
	e.set.FromNonzeroRHS = len(e.set.Patterns)
	e.add(NewSignPattern(n)) // w = 0, the all-zero right-hand side
	return e.set, nil
}

// enumerator holds the scratch space of EnumerateSignPatterns.
type enumerator struct {
	B       []float64 // row-major n×k
	n, k    int
	opt     PatternOptions
	set     *PatternSet
	m, minv []float64   // k×k
	g       [][]float64 // k columns of B·B_I⁻¹, each length n
	vals    [][]float64 // 2^k vectors B·w(b)
	pat     SignPattern
	buf     []byte
}

func newEnumerator(B *mat.Dense, opt PatternOptions) *enumerator {
	n, k := B.Dims()
	e := &enumerator{
		B: mat.DenseCopyOf(B).RawMatrix().Data, n: n, k: k, opt: opt,
		set:  &PatternSet{N: n, K: k, index: map[string]int{}},
		m:    make([]float64, k*k),
		minv: make([]float64, k*k),
		g:    make([][]float64, k),
		vals: make([][]float64, 1<<k),
		pat:  NewSignPattern(n),
	}
	for t := range e.g {
		e.g[t] = make([]float64, n)
	}
	for b := range e.vals {
		e.vals[b] = make([]float64, n)
	}
	return e
}

func (e *enumerator) add(p SignPattern) {
	e.buf = p.key(e.buf)
	if _, ok := e.set.index[string(e.buf)]; ok {
		return
	}
	q := SignPattern{n: p.n, words: append([]uint64(nil), p.words...)}
	e.set.index[string(e.buf)] = len(e.set.Patterns)
	e.set.Patterns = append(e.set.Patterns, q)
}

// subset processes one k-subset of rows: all 2^k − 1 non-zero right-hand
// sides at once, since B·w(b) = Σ_{t: b_t=1} B·B_I⁻¹·e_t.
func (e *enumerator) subset(idx []int) {
	n, k := e.n, e.k
	e.set.Subsets++
	for a, r := range idx {
		copy(e.m[a*k:(a+1)*k], e.B[r*k:(r+1)*k])
	}
	if !linalg.InvertSmall(e.m, e.minv, k, e.opt.CondMax) {
		e.set.Singular++
		return
	}
	// g_t = B · (column t of B_I⁻¹).
	for j := 0; j < n; j++ {
		row := e.B[j*k : (j+1)*k]
		for t := 0; t < k; t++ {
			s := 0.0
			for c := 0; c < k; c++ {
				s += row[c] * e.minv[c*k+t]
			}
			e.g[t][j] = s
		}
	}
	for mask := 1; mask < 1<<k; mask++ {
		low := mask & -mask
		t := bits.TrailingZeros(uint(low))
		v, prev, gt := e.vals[mask], e.vals[mask^low], e.g[t]
		thr := 0.0
		for j := range v {
			x := prev[j] + gt[j]
			v[j] = x
			// Not the max builtin: its NaN handling costs 3× in this loop.
			if x > thr {
				thr = x
			} else if -x > thr {
				thr = -x
			}
		}
		thr *= e.opt.SignTol
		clear(e.pat.words)
		for j, x := range v {
			if x > thr {
				e.pat.words[j/64] |= 1 << (j % 64)
			}
		}
		// The tight rows are exactly 0 or 1; rounding must not decide them.
		for a, r := range idx {
			if mask&(1<<a) != 0 {
				e.pat.words[r/64] |= 1 << (r % 64)
			} else {
				e.pat.words[r/64] &^= 1 << (r % 64)
			}
		}
		e.set.Systems++
		e.add(e.pat)
	}
}

// nextCombination advances idx, a strictly increasing k-subset of [0, n), to
// the next subset in lexicographic order; false after the last one.
func nextCombination(idx []int, n int) bool {
	k := len(idx)
	i := k - 1
	for i >= 0 && idx[i] == n-k+i {
		i--
	}
	if i < 0 {
		return false
	}
	idx[i]++
	for j := i + 1; j < k; j++ {
		idx[j] = idx[j-1] + 1
	}
	return true
}

// binom returns C(n, k) as a float64 (exact while below 2^53).
func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	k = min(k, n-k)
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

func binomInt(n, k int) int {
	b := binom(n, k)
	if b > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(b)
}

// WorstCaseWork returns the work estimate C(2n,k)·2k of the worst-case route
// (practical default, not in [BJW19]): the paper's bound C(2n,k) on the candidate patterns
// times the 2k LPs each may need. WorstCase refuses above
// WorstCaseOptions.MaxWork unless forced.
func WorstCaseWork(n, k int) float64 {
	return binom(2*n, k) * float64(2*k)
}

// GenericPatternCount returns 2·Σ_{i<k} C(n−1,i) + 1, the size of the
// candidate set 𝒮 for a basis in general position whose rows lie in no
// half-space (Cover's count of the regions of a central arrangement of n
// hyperplanes in R^k, plus ∅); one less when they do lie in a half-space.
func GenericPatternCount(n, k int) float64 {
	s := 0.0
	for i := 0; i < k; i++ {
		s += binom(n-1, i)
	}
	return 2*s + 1
}
