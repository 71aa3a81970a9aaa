package twolayer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// The worst-case exact route: Bakshi et al. §2, Lemma 1 (sign-pattern
// enumeration, "P0" in specs/001 §2.1), Alg 1 (IterativeLP) and Alg 2
// (ExactNeuralNet). It works for arbitrary inputs X — non-Gaussian, even
// adversarial — as long as rank(Y) = k, at a cost exponential in k. It is a
// reference solver for tiny instances (k ≤ 3, n ≤ ~60), not a practical
// learner; the Gaussian-input routes (TensorStart + ExactPolish) are.
//
// Row convention: the paper's V' ∈ R^{k×n}, a basis of rowspan(A), is here
// Bᵀ with B the n×k orthonormal basis of the column span of Y; the paper's
// y = wX ∈ R^n (a candidate pre-activation) is X·w with w ∈ R^d.

// RouteWorstCase names the worst-case exact route in Result.Route.
const RouteWorstCase = "worstcase-lp"

// ErrWorkLimit marks a refusal of the worst-case route because its
// exponential work estimate exceeds WorstCaseOptions.MaxWork. Errors wrapping
// it also wrap ErrInput: the fix is a smaller instance or Force.
// defaultMaxWork is WorstCaseOptions.MaxWork's default: about a minute of
// LPs on one core (specs/001 §2.3's guard rail).
const defaultMaxWork = 1e7

var ErrWorkLimit = errs.New("work limit exceeded", nil)

// WorstCaseOptions controls WorstCase. The zero value works.
type WorstCaseOptions struct {
	// Hidden is the number of hidden units k. 0 infers it as the numerical
	// rank of Y (σ_{k+1}/σ_1 < RankTol). A given k must equal that rank:
	// Alg 2 needs rank(Y) = k (Thm 1), and without it the problem is NP-hard
	// (Thm 2).
	Hidden int
	// RankTol is the relative singular-value threshold of the numerical rank
	// of Y (and of X). Default 1e-10.
	RankTol float64
	// SignTol decides "> 0" when reading a sign pattern off a vector v: an
	// entry counts as positive when it exceeds SignTol·max|v|. Default 1e-9.
	SignTol float64
	// NullTol is the relative singular-value threshold below which the
	// equality constraints of Alg 1 count as having a null space. Default
	// 1e-9.
	NullTol float64
	// LPTol is the simplex tolerance. Default 1e-9.
	LPTol float64
	// CertTol is the relative residual ‖Y − ReLU(XVᵀ)Uᵀ‖_F/‖Y‖_F the answer
	// must meet; otherwise WorstCase returns an error wrapping ErrNotExact.
	// Default 1e-8.
	CertTol float64
	// MaxWork caps the work estimate C(2n,k)·2k (specs/001 §3.3): above it
	// WorstCase refuses with an error wrapping ErrWorkLimit that says how long
	// the run would take. Default 1e7.
	MaxWork float64
	// Force runs the route even above MaxWork.
	Force bool
	// Progress, if non-nil, is called as stages advance (stage name, done,
	// total). It must be cheap.
	Progress func(stage string, done, total int)
}

func (o WorstCaseOptions) withDefaults() WorstCaseOptions {
	if o.RankTol <= 0 {
		o.RankTol = 1e-10
	}
	if o.SignTol <= 0 {
		o.SignTol = 1e-9
	}
	if o.NullTol <= 0 {
		o.NullTol = 1e-9
	}
	if o.LPTol <= 0 {
		o.LPTol = 1e-9
	}
	if o.CertTol <= 0 {
		o.CertTol = 1e-8
	}
	if o.MaxWork <= 0 {
		o.MaxWork = defaultMaxWork
	}
	return o
}

func (o WorstCaseOptions) progress(stage string, done, total int) {
	if o.Progress != nil {
		o.Progress(stage, done, total)
	}
}

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
// in the paper's sense (specs/001 §1.4). tol ≤ 0 means exact positivity.
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
	// polyhedron {Bw ≤ 0} has no vertex but w = 0 (specs/001 §2.1 counts
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

// EnumerateSignPatterns returns the candidate sign patterns of Lemma 1
// (specs/001 §2.1, "P0") for an n×k basis B of full column rank: for every
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
	if !invertSmall(e.m, e.minv, k, e.opt.CondMax) {
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

// invertSmall inverts the k×k row-major matrix a into inv by Gauss–Jordan
// elimination with partial pivoting (a is overwritten). It reports false
// when a is singular or its 1-norm condition number exceeds condMax.
func invertSmall(a, inv []float64, k int, condMax float64) bool {
	norm1 := 0.0
	for c := 0; c < k; c++ {
		s := 0.0
		for r := 0; r < k; r++ {
			s += math.Abs(a[r*k+c])
		}
		norm1 = max(norm1, s)
	}
	if norm1 == 0 {
		return false
	}
	clear(inv)
	for i := 0; i < k; i++ {
		inv[i*k+i] = 1
	}
	for c := 0; c < k; c++ {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r*k+c]) > math.Abs(a[p*k+c]) {
				p = r
			}
		}
		piv := a[p*k+c]
		if math.Abs(piv) <= 1e-300 || math.Abs(piv) < norm1*1e-15 {
			return false
		}
		if p != c {
			for j := 0; j < k; j++ {
				a[p*k+j], a[c*k+j] = a[c*k+j], a[p*k+j]
				inv[p*k+j], inv[c*k+j] = inv[c*k+j], inv[p*k+j]
			}
		}
		for j := 0; j < k; j++ {
			a[c*k+j] /= piv
			inv[c*k+j] /= piv
		}
		for r := 0; r < k; r++ {
			if r == c {
				continue
			}
			f := a[r*k+c]
			if f == 0 {
				continue
			}
			for j := 0; j < k; j++ {
				a[r*k+j] -= f * a[c*k+j]
				inv[r*k+j] -= f * inv[c*k+j]
			}
		}
	}
	ninv := 0.0
	for c := 0; c < k; c++ {
		s := 0.0
		for r := 0; r < k; r++ {
			s += math.Abs(inv[r*k+c])
		}
		ninv = max(ninv, s)
	}
	return norm1*ninv <= condMax
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
// (specs/001 §3.3): the paper's bound C(2n,k) on the candidate patterns
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

// wcProblem is the data of Alg 1 in the reduced coordinates: X·w = Ux·a with
// Ux (n×r) an orthonormal basis of col(X) and w = Wmap·a, so the equality
// constraints of every LP mix two orthonormal bases of comparable scale, and
// directions of w that X cannot see (rank(X) < d) are never variables.
type wcProblem struct {
	X, B, ux, wmap *mat.Dense
	n, d, r, k     int
	opt            WorstCaseOptions
	lps, lpFail    int
	rejected       int
}

func newWCProblem(X, B *mat.Dense, opt WorstCaseOptions) (*wcProblem, error) {
	n, d := X.Dims()
	_, k := B.Dims()
	u, s, v, err := linalg.ThinSVD(X)
	if err != nil {
		return nil, fmt.Errorf("twolayer: SVD of X: %w", err)
	}
	r := linalg.NumericalRank(s, 1e-12)
	if r == 0 {
		return nil, fmt.Errorf("%w: X is identically zero", ErrInput)
	}
	ux := mat.DenseCopyOf(u.Slice(0, n, 0, r))
	wmap := mat.NewDense(d, r, nil)
	for i := 0; i < d; i++ {
		for j := 0; j < r; j++ {
			wmap.Set(i, j, v.At(i, j)/s[j])
		}
	}
	return &wcProblem{X: X, B: B, ux: ux, wmap: wmap, n: n, d: d, r: r, k: k, opt: opt}, nil
}

// nullBasis returns an orthonormal basis ((r+k)×p) of the solutions (a, z)
// of the equality constraints of Alg 1 for pattern S — (Ux·a)_j = (B·z)_j on
// S, (B·z)_j = 0 off S — or nil when only 0 solves them. Parametrising the
// LP by this null space is the spec's "drop redundant equality rows" done
// exactly: the LP keeps only inequalities, whose slacks give gonum's simplex
// a full-rank constraint matrix.
func (p *wcProblem) nullBasis(S SignPattern) (*mat.Dense, error) {
	c := p.r + p.k
	E := mat.NewDense(p.n, c, nil)
	for j := 0; j < p.n; j++ {
		row := E.RawRowView(j)
		brow := p.B.RawRowView(j)
		if S.Has(j) {
			copy(row[:p.r], p.ux.RawRowView(j))
			for t, v := range brow {
				row[p.r+t] = -v
			}
		} else {
			copy(row[p.r:], brow)
		}
	}
	return linalg.NullSpace(E, p.opt.NullTol)
}

// iterativeLP is Alg 1 in the (w, z) form of specs/001 §2.2 for one pattern
// with null basis N: up to 2(k−i+1) LPs, each asking for (Nperpᵀz)_t ≥ 1 or
// ≤ −1, where Nperp spans the complement of the previous z's. It returns the
// first feasible (w, z) that also passes a direct check in the original
// coordinates, or ok = false.
func (p *wcProblem) iterativeLP(S SignPattern, N, Nperp *mat.Dense) (w, z []float64, ok bool) {
	_, np := N.Dims()
	Na := N.Slice(0, p.r, 0, np)
	Nz := N.Slice(p.r, p.r+p.k, 0, np)
	var XA mat.Dense // n×p: (Ux·a) as a function of t
	XA.Mul(p.ux, Na)
	var C mat.Dense // q×p: (Nperpᵀ·z) as a function of t
	C.Mul(Nperp.T(), Nz)
	q, _ := C.Dims()
	// Skip the LPs when every solution's z lies in the previous span.
	if mat.Norm(&C, math.Inf(1)) < 1e-9 {
		return nil, nil, false
	}
	base := make([][]float64, 0, p.n)
	hbase := make([]float64, 0, p.n)
	for j := 0; j < p.n; j++ {
		row := append([]float64(nil), XA.RawRowView(j)...)
		h := 0.0
		if S.Has(j) { // (Ux a)_j ≥ 1  ⇔  −(Ux a)_j ≤ −1
			for i := range row {
				row[i] = -row[i]
			}
			h = -1
		}
		var ok bool
		if base, hbase, ok = appendIneq(base, hbase, row, h); !ok {
			return nil, nil, false
		}
	}
	for t := 0; t < q; t++ {
		for _, sgn := range []float64{1, -1} {
			row := make([]float64, np)
			for i := range row {
				row[i] = -sgn * C.At(t, i) // sgn·(Nperpᵀz)_t ≥ 1
			}
			G, h, ok := appendIneq(base[:len(base):len(base)], hbase[:len(hbase):len(hbase)], row, -1)
			if !ok {
				continue
			}
			p.lps++
			tv, feasible, failed := solveFeasibility(G, h, np, p.opt.LPTol)
			if failed {
				p.lpFail++
			}
			if !feasible {
				continue
			}
			tvec := mat.NewVecDense(np, tv)
			var a, zv, wv mat.VecDense
			a.MulVec(Na, tvec)
			zv.MulVec(Nz, tvec)
			wv.MulVec(p.wmap, &a)
			ww := append([]float64(nil), wv.RawVector().Data...)
			zz := append([]float64(nil), zv.RawVector().Data...)
			if p.check(ww, zz) {
				return ww, zz, true
			}
			p.rejected++
		}
	}
	return nil, nil, false
}

// check verifies an LP solution in the original coordinates: ReLU(X·w)
// equals B·z to 1e-7 relative. It guards against patterns whose equality
// system only nearly has a null space.
func (p *wcProblem) check(w, z []float64) bool {
	var y, bz mat.VecDense
	y.MulVec(p.X, mat.NewVecDense(p.d, w))
	bz.MulVec(p.B, mat.NewVecDense(p.k, z))
	scale, diff := 0.0, 0.0
	for j := 0; j < p.n; j++ {
		f := max(y.AtVec(j), 0)
		scale = max(scale, math.Abs(bz.AtVec(j)))
		diff = max(diff, math.Abs(f-bz.AtVec(j)))
	}
	return scale > 0 && diff <= 1e-7*scale
}

// appendIneq appends the inequality g·t ≤ h scaled to a unit row. A zero row
// is dropped when 0 ≤ h holds and makes the system infeasible (ok = false)
// when not.
func appendIneq(G [][]float64, hs []float64, g []float64, h float64) ([][]float64, []float64, bool) {
	nrm := 0.0
	for _, v := range g {
		nrm += v * v
	}
	nrm = math.Sqrt(nrm)
	if nrm < 1e-13 {
		return G, hs, h >= 0
	}
	for i := range g {
		g[i] /= nrm
	}
	return append(G, g), append(hs, h/nrm), true
}

// solveFeasibility decides whether {t ∈ R^p : G·t ≤ h} is non-empty with
// gonum's simplex. It solves min s subject to G·t − s·1 ≤ h, s ≥ 0 (the
// system is feasible iff the optimum is 0), converted to standard form by
// lp.Convert (free variables split, slacks added). The artificial s is there
// because t = 0, s = max(−h) is a feasible vertex we can hand to Simplex as
// its initial basis: left to find one itself, gonum tests columns for
// independence with a condition-number estimate per column, which cost 90%
// of the route's time. It returns a feasible t, and failed = true when the
// simplex broke down (reported as infeasible; the next pattern is tried).
func solveFeasibility(G [][]float64, h []float64, p int, tol float64) (t []float64, feasible, failed bool) {
	defer func() {
		// gonum's simplex panics on a few degenerate inputs; a breakdown
		// must cost one candidate pattern, not the process.
		if r := recover(); r != nil {
			t, feasible, failed = nil, false, true
		}
	}()
	m := len(G)
	s0, i0 := 0.0, -1
	for i, hi := range h {
		if -hi > s0 {
			s0, i0 = -hi, i
		}
	}
	if i0 < 0 {
		return make([]float64, p), true, false // t = 0 satisfies every row
	}
	// Variables (t, s); rows G·t − s ≤ h and −s ≤ 0.
	g := mat.NewDense(m+1, p+1, nil)
	hh := make([]float64, m+1)
	for i, row := range G {
		copy(g.RawRowView(i), row)
		g.Set(i, p, -1)
		hh[i] = h[i]
	}
	g.Set(m, p, -1)
	c := make([]float64, p+1)
	c[p] = 1
	cNew, A, b := lp.Convert(c, g, hh, nil, nil)
	// Standard-form columns: (t, s)⁺ (p+1), (t, s)⁻ (p+1), slacks (m+1).
	// The basis {s⁺} ∪ {slack_i : i ≠ i0} has s = s0, slack_i = h_i + s0 ≥ 0.
	basic := make([]int, 0, m+1)
	basic = append(basic, p)
	for i := 0; i <= m; i++ {
		if i != i0 {
			basic = append(basic, 2*(p+1)+i)
		}
	}
	opt, x, err := lp.Simplex(cNew, A, b, tol, basic)
	if err != nil {
		return nil, false, true
	}
	if opt > tol {
		return nil, false, false
	}
	t = make([]float64, p)
	for i := range t {
		t[i] = x[i] - x[p+1+i]
	}
	return t, true, false
}

// IterativeLP is Bakshi et al. Alg 1 in the reduced (w, z) form of specs/001
// §2.2: it looks for w ∈ R^d and z ∈ R^k with (X·w)_j ≥ 1 on S, ≤ 0 off S,
// ReLU(X·w) = B·z (the activation lies in col(B) = col(Y)) and z outside the
// span of the previous prevZ. The paper's independence constraint
// f_S(y)(I − P) ≠ 0 is equivalent to z ∉ span(prevZ) because B has full
// column rank, so 2(k − i + 1) LPs with (Nᵀz)_t ≥ 1 or ≤ −1 replace the
// paper's 2n (Remark 1), N an orthonormal basis of span(prevZ)^⊥. The paper's
// projection Qᵀ(QᵀQ)⁻¹Q is a typo for Qᵀ(QQᵀ)⁻¹Q (specs/001 §8.1); it is not
// needed in this form.
//
// It returns ok = false when S is infeasible. opt supplies the tolerances
// (zero value: defaults).
func IterativeLP(X, B *mat.Dense, S SignPattern, prevZ [][]float64, opt WorstCaseOptions) (w, z []float64, ok bool, err error) {
	if X == nil || B == nil {
		return nil, nil, false, fmt.Errorf("%w: X and B are required", ErrInput)
	}
	n, _ := X.Dims()
	nb, k := B.Dims()
	if nb != n || S.Len() != n {
		return nil, nil, false, fmt.Errorf("%w: X has %d rows, B %d and the pattern %d; all need one per sample", ErrInput, n, nb, S.Len())
	}
	if len(prevZ) >= k {
		return nil, nil, false, fmt.Errorf("%w: %d previous vectors already span R^%d", ErrInput, len(prevZ), k)
	}
	for t, M := range []*mat.Dense{X, B} {
		r, c := M.Dims()
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				if v := M.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, nil, false, fmt.Errorf("%w: %s has %v at row %d, column %d", ErrInput, [...]string{"X", "B"}[t], v, i, j)
				}
			}
		}
	}
	p, err := newWCProblem(X, B, opt.withDefaults())
	if err != nil {
		return nil, nil, false, err
	}
	Nperp, err := complementBasis(prevZ, k)
	if err != nil {
		return nil, nil, false, err
	}
	N, err := p.nullBasis(S)
	if err != nil || N == nil {
		return nil, nil, false, err
	}
	w, z, ok = p.iterativeLP(S, N, Nperp)
	return w, z, ok, nil
}

// complementBasis returns a k×(k−i) orthonormal basis of the orthogonal
// complement of span(prev) (the identity when prev is empty).
func complementBasis(prev [][]float64, k int) (*mat.Dense, error) {
	if len(prev) == 0 {
		I := mat.NewDense(k, k, nil)
		for i := 0; i < k; i++ {
			I.Set(i, i, 1)
		}
		return I, nil
	}
	P := mat.NewDense(len(prev), k, nil)
	for i, z := range prev {
		if len(z) != k {
			return nil, fmt.Errorf("%w: previous vector %d has length %d, want %d", ErrInput, i, len(z), k)
		}
		P.SetRow(i, z)
	}
	N, err := linalg.NullSpace(P, 1e-10)
	if err != nil {
		return nil, err
	}
	if N == nil {
		return nil, fmt.Errorf("%w: the previous vectors already span R^%d", ErrInput, k)
	}
	return N, nil
}

// WorstCaseReport is what the worst-case route did, beyond Result.
type WorstCaseReport struct {
	// Patterns is |𝒮|; Subsets and Singular as in PatternSet.
	Patterns, Subsets, Singular int
	// WithNullSpace counts the patterns whose equality constraints have a
	// non-trivial solution (the only ones that reach an LP).
	WithNullSpace int
	// LPs solved, LPFailures where gonum's simplex broke down, Rejected LP
	// solutions that failed the direct check.
	LPs, LPFailures, Rejected int
	// Chosen are the sign patterns of the k recovered units.
	Chosen []SignPattern
	// Work is C(2n,k)·2k; EstimatedSeconds the calibrated time estimate.
	Work, EstimatedSeconds float64
}

// WorstCase finds an exact two-layer network Y = ReLU(X·Vᵀ)·Uᵀ for arbitrary
// inputs X — Bakshi et al. Thm 1, Alg 2 (ExactNeuralNet) with Lemma 1's
// candidate patterns and Alg 1's LPs. It needs rank(Y) = k exactly (then
// some factorisation exists and is found); it makes no distributional
// assumption on X, which may be non-Gaussian or adversarial.
//
// Steps: B = the top-k left singular vectors of Y (the paper's V', better
// conditioned than k rows of A); 𝒮 = EnumerateSignPatterns(B); for units
// i = 1..k, the first pattern of 𝒮 whose LP (IterativeLP) is feasible gives
// a row w_i whose activation ReLU(X·w_i) lies in col(Y) and is independent
// of the previous ones; then U solves Y = ReLU(X·Wᵀ)·Uᵀ by least squares
// and V = W. The result must meet the residual certificate CertTol, else an
// error wrapping ErrNotExact is returned.
//
// The recovered V need not equal the teacher's V* up to permutation and
// scaling: Thm 1 promises some exact factorisation, not identifiability
// (worst-case X can admit several). Differences from the paper: the LPs are
// in the smaller (w, z) form with 2(k−i+1) instead of 2n linearisations, and
// their equality constraints are eliminated through an exact null-space
// basis, because gonum's simplex needs a full-rank constraint matrix.
//
// Cost: Θ(C(n,k)·n·2^k) for 𝒮 plus one n×(r+k) SVD per pattern and a few
// small LPs — exponential in k. It is a reference solver for tiny
// instances (k ≤ 3, n ≤ ~60); above WorstCaseWork(n,k) = MaxWork it refuses
// unless Force is set, saying how long it would take.
func WorstCase(ctx context.Context, X, Y *mat.Dense, opt WorstCaseOptions) (*Result, error) {
	res, _, err := WorstCaseWithReport(ctx, X, Y, opt)
	return res, err
}

// WorstCaseWithReport is WorstCase, also returning what the route did. The
// report is non-nil whenever the enumeration started, even on error.
func WorstCaseWithReport(ctx context.Context, X, Y *mat.Dense, opt WorstCaseOptions) (*Result, *WorstCaseReport, error) {
	began := time.Now()
	opt = opt.withDefaults()
	n, _, m, err := checkData(X, Y)
	if err != nil {
		return nil, nil, err
	}
	if opt.Hidden < 0 {
		return nil, nil, fmt.Errorf("%w: hidden width %d is negative", ErrInput, opt.Hidden)
	}
	u, s, _, err := linalg.ThinSVD(Y)
	if err != nil {
		return nil, nil, fmt.Errorf("twolayer: SVD of Y: %w", err)
	}
	rank := linalg.NumericalRank(s, opt.RankTol)
	k := opt.Hidden
	if k == 0 {
		k = rank
	} else if k != rank {
		why := "it cannot be written with fewer units"
		if k > rank {
			why = "Alg 2 needs rank(Y) = k (Thm 1); for rank(Y) < k deciding whether an exact network exists is NP-hard (Thm 2)"
		}
		return nil, nil, fmt.Errorf("%w: Y has numerical rank %d (σ_{i+1}/σ_1 < %.0e) but %d hidden units were asked for: %s; pass Hidden = %d or 0", ErrInput, rank, opt.RankTol, k, why, rank)
	}
	if k > m || k > n {
		return nil, nil, fmt.Errorf("%w: k = %d needs at least k outputs and samples (m = %d, n = %d)", ErrInput, k, m, n)
	}
	rep := &WorstCaseReport{Work: WorstCaseWork(n, k)}
	B := mat.DenseCopyOf(u.Slice(0, n, 0, k))
	prob, err := newWCProblem(X, B, opt)
	if err != nil {
		return nil, nil, err
	}
	if rep.Work > opt.MaxWork {
		rep.EstimatedSeconds = estimateSeconds(prob)
		if !opt.Force {
			return nil, rep, fmt.Errorf("%w: %w: the worst-case route (Alg 2) on n = %d samples with k = %d units needs ≈ %.2g work units (C(2n,k)·2k; limit %.0e), an estimated %s or less on this machine (C(n,k) = %.3g sign systems, ~%.3g candidate patterns); it is exponential in k and meant for k ≤ 3, n ≤ ~60. Set WorstCaseOptions.Force (CLI --force) to run it anyway, or use fewer samples",
				ErrInput, ErrWorkLimit, n, k, rep.Work, opt.MaxWork, humanSeconds(rep.EstimatedSeconds), binom(n, k), GenericPatternCount(n, k))
		}
	}

	set, err := EnumerateSignPatterns(ctx, B, PatternOptions{SignTol: opt.SignTol, Progress: func(done, total int) {
		opt.progress("sign patterns", done, total)
	}})
	if err != nil {
		return nil, rep, err
	}
	rep.Patterns, rep.Subsets, rep.Singular = set.Len(), set.Subsets, set.Singular

	// Null spaces are computed once per pattern and reused for every unit.
	nulls := make([]*mat.Dense, set.Len())
	for t, S := range set.Patterns {
		if t&63 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, rep, err
			}
			opt.progress("null spaces", t, set.Len())
		}
		if S.Count() == 0 {
			continue // f(y) = 0 is never independent
		}
		N, err := prob.nullBasis(S)
		if err != nil {
			return nil, rep, fmt.Errorf("twolayer: null space of pattern %d: %w", t, err)
		}
		if N != nil {
			nulls[t] = N
			rep.WithNullSpace++
		}
	}

	d := prob.d
	W := mat.NewDense(k, d, nil)
	var prevZ [][]float64
	for i := 0; i < k; i++ {
		opt.progress("units", i, k)
		Nperp, err := complementBasis(prevZ, k)
		if err != nil {
			return nil, rep, err
		}
		found := false
		for t, S := range set.Patterns {
			if nulls[t] == nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, rep, err
			}
			w, z, ok := prob.iterativeLP(S, nulls[t], Nperp)
			if !ok {
				continue
			}
			W.SetRow(i, w)
			prevZ = append(prevZ, z)
			rep.Chosen = append(rep.Chosen, S)
			found = true
			break
		}
		rep.LPs, rep.LPFailures, rep.Rejected = prob.lps, prob.lpFail, prob.rejected
		if !found {
			return nil, rep, fmt.Errorf("%w: unit %d of %d: no candidate sign pattern (of %d, %d with a null space) gives an activation in col(Y) independent of the previous ones (%d LPs, %d simplex breakdowns); Y is rank %d but is not ReLU(X·Vᵀ)·Uᵀ exactly — noisy outputs?",
				ErrNotExact, i+1, k, set.Len(), rep.WithNullSpace, rep.LPs, rep.LPFailures, k)
		}
	}
	opt.progress("units", k, k)

	U, condF, err := SolveU(X, Y, W)
	if err != nil {
		return nil, rep, fmt.Errorf("%w: %w", ErrNotExact, err)
	}
	F := activations(X, W)
	resid := residualOf(F, Y, U)
	if !(resid <= opt.CertTol) {
		return nil, rep, fmt.Errorf("%w: the worst-case route found %d units but their residual %.2e exceeds %.0e", ErrNotExact, k, resid, opt.CertTol)
	}
	res := &Result{
		Model: nn.NewTwoLayer(W, U).Canonical(),
		Route: RouteWorstCase,
		Reason: fmt.Sprintf("worst-case exact route (Bakshi et al. Alg 2): %d sign patterns from %d k-subsets, %d with a null space, %d LPs; the network is an exact factorisation of Y, not necessarily the teacher's",
			set.Len(), set.Subsets, rep.WithNullSpace, rep.LPs),
		Certificate: Certificate{Residual: resid, Tol: opt.CertTol, Samples: n, Met: true},
	}
	res.Diagnostics.Hidden = k
	res.Diagnostics.HiddenInferred = opt.Hidden == 0
	res.Diagnostics.SingularValuesY = s
	res.Diagnostics.CondF = condF
	if prob.r < d {
		res.Warnings = append(res.Warnings, fmt.Sprintf("X has rank %d < d = %d: V is only determined on the row span of X (the returned rows have no component outside it)", prob.r, d))
	}
	if rep.LPFailures > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("gonum's simplex broke down on %d of %d LPs (treated as infeasible)", rep.LPFailures, rep.LPs))
	}
	res.Elapsed = time.Since(began)
	return res, rep, nil
}

// estimateSeconds times a sample of the route's two costly steps on the
// actual data — k×k sign systems (all C(n,k) subsets are visited) and
// pattern null spaces (at most GenericPatternCount of them; fewer when many
// samples are inactive for every unit) — and extrapolates. The LPs are
// left out: they only run on the few patterns with a null space.
func estimateSeconds(p *wcProblem) float64 {
	n, k := p.n, p.k
	e := newEnumerator(p.B, PatternOptions{SignTol: p.opt.SignTol, CondMax: 1e12})
	rng := rand.New(rand.NewPCG(1, 2))
	// Time-boxed samples of the two unit costs: a refusal must come back
	// quickly however large the instance is.
	const budget = 200 * time.Millisecond
	trials := 0
	t0 := time.Now()
	for trials < 2000 && (trials == 0 || time.Since(t0) < budget) {
		e.subset(rng.Perm(n)[:k])
		trials++
	}
	perSubset := time.Since(t0).Seconds() / float64(trials)
	pats := append(e.set.Patterns, NewSignPattern(n, 0))
	nulls := 0
	t0 = time.Now()
	for nulls < 8 && (nulls == 0 || time.Since(t0) < budget) {
		p.nullBasis(pats[nulls%len(pats)])
		nulls++
	}
	perNull := time.Since(t0).Seconds() / float64(nulls)
	return binom(n, k)*perSubset + GenericPatternCount(n, k)*perNull
}

func humanSeconds(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.0f s", math.Ceil(s))
	case s < 2*3600:
		return fmt.Sprintf("%.0f min", s/60)
	case s < 2*86400:
		return fmt.Sprintf("%.1f h", s/3600)
	case s < 2*365*86400:
		return fmt.Sprintf("%.0f days", s/86400)
	default:
		return fmt.Sprintf("%.2g years", s/(365*86400))
	}
}
