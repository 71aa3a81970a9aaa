package twolayer

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strings"
)

// Sign patterns and candidate sets of the worst-case route (Lemma 1 of
// [BJW19]): the samples a hidden unit is active on.

// SignPattern is a subset of the n samples — the strictly positive
// coordinates of a vector in R^n — stored as a bitset.
type SignPattern struct {
	n     int
	words []uint64
}

// NewSignPattern returns the pattern over n samples holding the given
// indices (out-of-range indices are ignored).
func NewSignPattern(n int, indices ...int) SignPattern {
	p := SignPattern{n: n, words: make([]uint64, (n+63)/64)}
	for _, j := range indices {
		if j >= 0 && j < n {
			p.words[j/64] |= 1 << (j % 64)
		}
	}
	return p
}

// PatternOf returns sign(v) = {j : v_j > tol·max|v|}, the sign pattern of v
// in the paper's sense ([BJW19]'s notation). tol ≤ 0 means exact positivity.
func PatternOf(v []float64, tol float64) SignPattern {
	p := NewSignPattern(len(v))
	thr := 0.0
	if tol > 0 {
		for _, x := range v {
			thr = max(thr, math.Abs(x))
		}
		thr *= tol
	}
	for j, x := range v {
		if x > thr {
			p.words[j/64] |= 1 << (j % 64)
		}
	}
	return p
}

// Len is the number of samples n the pattern ranges over.
func (p SignPattern) Len() int { return p.n }

// Has reports whether sample j is in the pattern.
func (p SignPattern) Has(j int) bool {
	return j >= 0 && j < p.n && p.words[j/64]&(1<<(j%64)) != 0
}

// Count is the number of samples in the pattern.
func (p SignPattern) Count() int {
	c := 0
	for _, w := range p.words {
		c += bits.OnesCount64(w)
	}
	return c
}

// Indices lists the samples in the pattern in increasing order.
func (p SignPattern) Indices() []int {
	out := make([]int, 0, p.Count())
	for j := 0; j < p.n; j++ {
		if p.Has(j) {
			out = append(out, j)
		}
	}
	return out
}

// Equal reports whether p and q are the same subset of the same n samples.
func (p SignPattern) Equal(q SignPattern) bool {
	if p.n != q.n {
		return false
	}
	for i := range p.words {
		if p.words[i] != q.words[i] {
			return false
		}
	}
	return true
}

// String prints the pattern as a 0/1 string, sample 0 first.
func (p SignPattern) String() string {
	var b strings.Builder
	for j := 0; j < p.n; j++ {
		if p.Has(j) {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

func (p SignPattern) key(buf []byte) []byte {
	buf = buf[:0]
	for _, w := range p.words {
		buf = binary.LittleEndian.AppendUint64(buf, w)
	}
	return buf
}

// PatternSet is the candidate set 𝒮 of Lemma 1.
type PatternSet struct {
	// N and K are the dimensions of the basis the patterns came from.
	N, K int
	// Patterns in discovery order (deterministic: subsets in lexicographic
	// order, right-hand sides in binary order, then ∅ last if new).
	Patterns []SignPattern
	// Subsets is the number of k-subsets of rows visited, C(n,k); Singular
	// of them were skipped because their k×k system is singular or worse
	// conditioned than PatternOptions.CondMax.
	Subsets, Singular int
	// Systems counts the k×k solves with a non-zero right-hand side.
	Systems int
	// FromNonzeroRHS is the number of distinct patterns found by systems
	// with a non-zero right-hand side, before ∅ (from w = 0) is added. For
	// a basis in general position it is one per region of the central
	// hyperplane arrangement {w : (Bw)_j = 0}, 2·Σ_{i<k} C(n−1,i), minus one
	// when the rows of B lie in a half-space: the all-negative region's
	// polyhedron {Bw ≤ 0} has no vertex but w = 0 ([BJW19, Lemma 1] counts
	// 2·Σ, assuming that region is empty).
	FromNonzeroRHS int

	index map[string]int
}

// Contains reports whether p is in the set.
func (s *PatternSet) Contains(p SignPattern) bool {
	if p.n != s.N {
		return false
	}
	_, ok := s.index[string(p.key(nil))]
	return ok
}

// Len is |𝒮|.
func (s *PatternSet) Len() int { return len(s.Patterns) }

// PatternOptions controls EnumerateSignPatterns. The zero value works.
type PatternOptions struct {
	// SignTol: an entry of Bw counts as positive when it exceeds
	// SignTol·max|Bw|. Default 1e-9.
	SignTol float64
	// CondMax skips k×k systems whose 1-norm condition number exceeds it:
	// their solutions carry too much rounding error to read signs from.
	// (Exact singularity — e.g. rows of B that vanish because no unit is
	// active on the sample — is the common case; a vertex whose only tight
	// set is nearly singular would be lost, which the tests never met.)
	// Default 1e12.
	CondMax float64
	// Progress, if non-nil, is called with the number of subsets done and
	// the total C(n,k).
	Progress func(done, total int)
}
