package twolayer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// RouteFPT is the fixed-parameter route for output weights U* of any rank
// (Bakshi et al. Alg 7, §6): samples where a single hidden unit is active
// give outputs along that unit's column of U*; grouping them by direction
// and solving one linear system per group gives V and then U exactly.
const RouteFPT = "fpt"

// FPTOptions controls FitFPT. The zero value works.
type FPTOptions struct {
	// Options are the learner's options (Fit passes its own); the route
	// reads Hidden, CertTol and Progress, and FitFPT validates them as Fit
	// does (Route is ignored). Hidden 0 takes the number of collinearity
	// classes with at least d members. CertTol is the relative residual
	// ‖Y − f(XVᵀ)Uᵀ‖_F/‖Y‖_F below which the answer counts as exact
	// (default as Fit's).
	Options
	// CollinearTol is the largest distance ‖ŷ_a − ŷ_b‖ between two
	// normalised output rows that still counts as the same direction.
	// Default 1e-9 (practical default, not in [BJW19]); noiseless rows of one class agree to
	// ~1e-15.
	CollinearTol float64
}

// FPTMinSamples returns the default sample floor of the FPT route, 4·d·2^k:
// for orthonormal V* a sample activates unit i alone with probability
// exactly 2^{-k}, so each class then expects 4·d members, comfortably above
// the d that its linear system needs ([BJW19, Alg 7]). An ill-conditioned
// V* needs more (Lemma 21: n = Ω(d·log(k/δ)·(kκ)^{2k})). It returns
// math.MaxInt when the product overflows.
func FPTMinSamples(d, k int) int {
	if k >= 62 || d <= 0 || k < 0 {
		return math.MaxInt
	}
	p := 4 * d
	if p > math.MaxInt>>k {
		return math.MaxInt
	}
	return p << k
}

// CollinearClass is a set of samples whose output rows are positive
// multiples of one another.
type CollinearClass struct {
	// Direction is the unit vector (length m) of the class's first member.
	Direction []float64
	// Members are the sample indices, ascending.
	Members []int
}

// CollinearClasses groups the non-zero rows of Y (n×m) into classes of
// mutually positively collinear rows — steps 1–2 of Bakshi et al. Alg 7 with
// erratum §8.6 applied: only c > 0 counts, so rows along u and −u fall in
// different classes. Each row is normalised; rows are bucketed by a hash of
// their coordinates on a grid of 1000·tol (neighbouring cells are looked up
// for coordinates within tol of a cell edge, so no pair is missed), and a
// row joins a class only if ‖ŷ − direction‖ ≤ tol. Expected cost O(n·m).
//
// It returns the classes with at least two members, largest first (ties by
// first member), and the number of zero rows (‖y‖ ≤ 1e-14·max‖y‖). Rows
// with several active units lie inside a cone of dimension ≥ 2 and are
// generically collinear with no other row; they form singletons, which are
// dropped.
func CollinearClasses(Y *mat.Dense, tol float64) ([]CollinearClass, int, error) {
	return collinearClasses(Y, tol, true)
}

// collinearClasses is CollinearClasses; screen false hashes every row
// (the tests' reference for pairedRows).
func collinearClasses(Y *mat.Dense, tol float64, screen bool) ([]CollinearClass, int, error) {
	if Y == nil {
		return nil, 0, fmt.Errorf("%w: Y is required", ErrInput)
	}
	n, m := Y.Dims()
	if !(tol > 0 && tol < 1e-3) {
		return nil, 0, fmt.Errorf("%w: collinearity tolerance %g; want 0 < tol < 1e-3", ErrInput, tol)
	}
	norms, maxNorm, err := finiteRowNorms(Y)
	if err != nil {
		return nil, 0, err
	}
	ix := &classIndex{
		Y: Y, norms: norms, m: m, tol: tol, cell: 1000 * tol,
		buckets: map[uint64][2]int32{},
		u:       make([]float64, m), dir: make([]float64, m), cells: make([]int64, m),
	}
	zeros := 0
	var paired []bool
	if screen {
		paired = pairedRows(Y, norms, maxNorm, tol)
	}
	for q := 0; q < n; q++ {
		if norms[q] <= 1e-14*maxNorm {
			zeros++
			continue
		}
		if paired != nil && !paired[q] {
			continue // a singleton whatever the other rows are
		}
		ix.add(q)
	}
	return ix.classes(), zeros, nil
}

// finiteRowNorms returns the Euclidean norm of every row of Y and the
// largest, or an error for a non-finite entry or a norm that overflows.
func finiteRowNorms(Y *mat.Dense) (norms []float64, maxNorm float64, err error) {
	n, m := Y.Dims()
	norms = make([]float64, n)
	for q := 0; q < n; q++ {
		row := Y.RawRowView(q)[:m]
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, 0, fmt.Errorf("%w: Y has %v in row %d; remove or impute non-finite values", ErrInput, v, q)
			}
		}
		norms[q] = math.Sqrt(dot(row, row))
		if math.IsInf(norms[q], 0) {
			return nil, 0, fmt.Errorf("%w: row %d of Y is too large to normalise (its squared norm overflows float64); divide Y by a constant", ErrInput, q)
		}
		maxNorm = math.Max(maxNorm, norms[q])
	}
	return norms, maxNorm, nil
}

// classIndex is collinearClasses's hash of directions. Most rows of a
// network with several active units are classes of their own, so a class
// holds no copy of its direction: it is its first member's row, normalised
// again when needed (the same division, the same bits). Classes live in
// flat arrays indexed by class, a bucket is a list threaded through next,
// and members are listed only once a second one joins: about 60 bytes per
// row that pairedRows keeps, instead of a copy of Y.
type classIndex struct {
	Y         *mat.Dense
	norms     []float64
	m         int
	tol, cell float64
	first     []int32             // each class's first member
	next      []int32             // the class after it in its bucket, −1 at the end
	members   [][]int             // per class: its members once it has ≥ 2, else nil
	buckets   map[uint64][2]int32 // first and last class of a bucket
	u, dir    []float64           // the row's direction, a class's direction
	cells     []int64             // the row's cell
	edges     []int               // coordinates within tol of a cell edge
	offs      []int64             // and the neighbour's offset
}

// direction writes row q of Y, normalised, to dst.
func (ix *classIndex) direction(dst []float64, q int) []float64 {
	for j, v := range ix.Y.RawRowView(q)[:ix.m] {
		dst[j] = v / ix.norms[q]
	}
	return dst
}

// add puts row q into the class whose direction is within tol of its own,
// or founds a class of its own.
func (ix *classIndex) add(q int) {
	tol, cell, u := ix.tol, ix.cell, ix.u
	row := ix.Y.RawRowView(q)[:ix.m]
	ix.edges, ix.offs = ix.edges[:0], ix.offs[:0]
	for j, v := range row {
		u[j] = v / ix.norms[q]
		f := u[j] / cell
		c := math.Floor(f)
		ix.cells[j] = int64(c)
		switch frac := f - c; {
		case frac*cell < tol:
			ix.edges, ix.offs = append(ix.edges, j), append(ix.offs, -1)
		case (1-frac)*cell < tol:
			ix.edges, ix.offs = append(ix.edges, j), append(ix.offs, 1)
		}
	}
	if found := ix.find(); found >= 0 {
		ms := ix.members[found]
		if ms == nil {
			ms = []int{int(ix.first[found])}
		}
		ix.members[found] = append(ms, q)
		return
	}
	key := cellKey(ix.cells, nil, nil, 0)
	ci := int32(len(ix.first))
	ix.first, ix.next, ix.members = append(ix.first, int32(q)), append(ix.next, -1), append(ix.members, nil)
	if b, ok := ix.buckets[key]; ok {
		ix.next[b[1]] = ci
		ix.buckets[key] = [2]int32{b[0], ci}
	} else {
		ix.buckets[key] = [2]int32{ci, ci}
	}
}

// find returns the first class within tol of the direction in u, or −1.
// It tries the row's own cell and, for rows near cell edges, the
// neighbouring cells (at most 2^10 combinations; beyond that a near-edge
// coordinate is simply not explored, which can only split a class, and the
// class-count check then reports it).
func (ix *classIndex) find() int32 {
	found := int32(-1)
	ne := min(len(ix.edges), 10)
	for mask := 0; mask < 1<<ne && found < 0; mask++ {
		key := cellKey(ix.cells, ix.edges[:ne], ix.offs[:ne], mask)
		b, ok := ix.buckets[key]
		for ci := b[0]; ok && ci >= 0; ci = ix.next[ci] {
			d2 := 0.0
			for j, v := range ix.direction(ix.dir, int(ix.first[ci])) {
				d2 += (ix.u[j] - v) * (ix.u[j] - v)
			}
			if d2 <= ix.tol*ix.tol {
				found = ci
				break
			}
		}
	}
	return found
}

// classes returns the classes with at least two members, largest first
// (ties by first member).
func (ix *classIndex) classes() []CollinearClass {
	var out []CollinearClass
	for ci := range ix.first {
		if ms := ix.members[ci]; len(ms) >= 2 {
			out = append(out, CollinearClass{Direction: ix.direction(make([]float64, ix.m), int(ix.first[ci])), Members: ms})
		}
	}
	slices.SortStableFunc(out, func(a, b CollinearClass) int {
		if len(a.Members) != len(b.Members) {
			return len(b.Members) - len(a.Members)
		}
		return a.Members[0] - b.Members[0]
	})
	return out
}

// pairedRows marks the non-zero rows of Y whose direction may lie within
// tol of another row's: a row joins or founds a class of two or more only
// with such a partner. The test is one projection: for a unit vector g,
// |ŷ_q·g − ŷ_p·g| ≤ ‖ŷ_q − ŷ_p‖, so rows whose projections are farther than
// tol (plus rounding slack) from every other row's have no partner. Most
// rows of a network with several active units are such singletons (their
// projections are spread over [−1, 1] about 1/n apart, far more than tol),
// and CollinearClasses skips them without hashing them: the same classes,
// since a row that can neither join nor be joined changes no other row's
// class.
func pairedRows(Y *mat.Dense, norms []float64, maxNorm, tol float64) []bool {
	n, m := Y.Dims()
	g := randUnit(m, rand.New(rand.NewPCG(0xC011, 0x1EA2)))
	// Rounding of ŷ and of the projection is a few ulps per coordinate.
	slack := tol*(1+1e-6) + 1e-12
	paired := make([]bool, n)
	// Each key packs the projection h ∈ [−1, 1] (plus rounding), shifted
	// by 2 and quantised to 2^−hBits, above the row index (idxBits), so
	// that one sort of integers orders the rows by h; rows whose quantised
	// projections differ by at most slack·2^hBits + 1 steps are marked
	// (a superset of those within slack, which is all the screen needs).
	const idxBits, hBits = 25, 37
	if n >= 1<<idxBits {
		for q := range paired {
			paired[q] = true // too many rows to pack: no screen
		}
		return paired
	}
	keys := make([]uint64, 0, n)
	for q := 0; q < n; q++ {
		if norms[q] <= 1e-14*maxNorm {
			continue
		}
		h := 0.0
		for j, v := range Y.RawRowView(q)[:m] {
			h += v / norms[q] * g[j]
		}
		keys = append(keys, uint64((h+2)*(1<<hBits))<<idxBits|uint64(q))
	}
	radixSortHigh(keys, idxBits)
	steps := uint64(slack*(1<<hBits)) + 1
	const mask = 1<<idxBits - 1
	for i := 1; i < len(keys); i++ {
		if keys[i]>>idxBits-keys[i-1]>>idxBits <= steps {
			paired[keys[i]&mask], paired[keys[i-1]&mask] = true, true
		}
	}
	return paired
}

// radixSortHigh sorts keys by their bits from lo up (the lower bits in no
// particular order): least-significant-digit radix sort, 11 bits a pass.
func radixSortHigh(keys []uint64, lo int) {
	const bits = 11
	if len(keys) == 0 {
		return
	}
	tmp := make([]uint64, len(keys))
	src, dst := keys, tmp
	for shift := lo; shift < 64; shift += bits {
		var count [1<<bits + 1]int
		for _, k := range src {
			count[(k>>shift)&(1<<bits-1)+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, k := range src {
			b := (k >> shift) & (1<<bits - 1)
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// cellKey hashes the grid cell of a normalised row (FNV-1a over the cell
// indices), with the cells of edges[i] moved by offs[i] where bit i of mask
// is set. Collisions are harmless: membership is confirmed by distance.
func cellKey(cells []int64, edges []int, offs []int64, mask int) uint64 {
	h := uint64(14695981039346656037)
	e := 0
	for j, c := range cells {
		if e < len(edges) && edges[e] == j {
			if mask&(1<<e) != 0 {
				c += offs[e]
			}
			e++
		}
		x := uint64(c)
		for b := 0; b < 8; b++ {
			h ^= x & 0xff
			h *= 1099511628211
			x >>= 8
		}
	}
	return h
}

// fitClass solves ‖y_q‖ = x_q·w over the members by QR least squares and
// returns w with the relative residual of the fit.
func fitClass(X, Y *mat.Dense, members []int) ([]float64, float64, error) {
	_, d := X.Dims()
	A := mat.NewDense(len(members), d, nil)
	b := mat.NewDense(len(members), 1, nil)
	for j, q := range members {
		A.SetRow(j, X.RawRowView(q))
		b.Set(j, 0, math.Sqrt(dot(Y.RawRowView(q), Y.RawRowView(q))))
	}
	sol, err := linalg.LstSq(A, b)
	if err != nil {
		return nil, math.Inf(1), err
	}
	var r mat.Dense
	r.Mul(A, sol)
	r.Sub(&r, b)
	return mat.Col(nil, 0, sol), mat.Norm(&r, 2) / mat.Norm(b, 2), nil
}

// fitPair handles a class P along u whose antipodal class N (along −u) also
// exists, i.e. two columns of U* are u·α and −u·β. Then on P ∪ N the output
// along u is t = f(x·a) − f(x·b) with a = α·v_a, b = β·v_b: P holds the
// samples where a is active alone (t = x·a) and those where both are active
// with t = x·(a − b) > 0; N likewise with the roles swapped. Neither class
// fits one linear w, and a has to be fitted on the samples with x·b ≤ 0 only.
// The split is found by alternating: fit a on P's samples with x·b ≤ 0,
// b on N's with x·a ≤ 0 (starting from fits on all members), until the
// split stops changing. The result is accepted only if the two-unit model
// reproduces every member of both classes, which is the exactness check
// (the returned residual, relative, over P ∪ N).
func fitPair(X, Y *mat.Dense, P, N []int) (a, b []float64, fit float64) {
	const maxRounds = 100
	a, _, errA := fitClass(X, Y, P)
	b, _, errB := fitClass(X, Y, N)
	if errA != nil || errB != nil {
		return nil, nil, math.Inf(1)
	}
	_, d := X.Dims()
	split := func(S []int, other []float64) []int {
		var out []int
		for _, q := range S {
			if dot(X.RawRowView(q), other) <= 0 {
				out = append(out, q)
			}
		}
		return out
	}
	var prevP, prevN []int
	for round := 0; round < maxRounds; round++ {
		Ps, Ns := split(P, b), split(N, a)
		if len(Ps) < d || len(Ns) < d {
			return nil, nil, math.Inf(1)
		}
		if slices.Equal(Ps, prevP) && slices.Equal(Ns, prevN) {
			break
		}
		var err error
		if a, _, err = fitClass(X, Y, Ps); err != nil {
			return nil, nil, math.Inf(1)
		}
		if b, _, err = fitClass(X, Y, Ns); err != nil {
			return nil, nil, math.Inf(1)
		}
		prevP, prevN = Ps, Ns
	}
	var num, den float64
	for _, S := range []struct {
		idx  []int
		sign float64
	}{{P, 1}, {N, -1}} {
		for _, q := range S.idx {
			x := X.RawRowView(q)
			t := S.sign * math.Sqrt(dot(Y.RawRowView(q), Y.RawRowView(q)))
			e := math.Max(dot(x, a), 0) - math.Max(dot(x, b), 0) - t
			num += e * e
			den += t * t
		}
	}
	return a, b, math.Sqrt(num / den)
}

// antipode returns the index of the class pointing along −c.Direction (to
// within 1e-3: distinct columns of U* are far further apart), or −1.
func antipode(c CollinearClass, classes []CollinearClass) int {
	for i, o := range classes {
		d2 := 0.0
		for j, v := range o.Direction {
			d2 += (v + c.Direction[j]) * (v + c.Direction[j])
		}
		if d2 <= 1e-6 {
			return i
		}
	}
	return -1
}

// classFitTol is the relative residual of a class's linear system
// x_q·w = ‖y_q‖ above which its samples cannot come from one hidden unit.
const classFitTol = 1e-8

// FitFPT learns Y = ReLU(X·Vᵀ)·Uᵀ exactly when U* need not have full column
// rank (any m ≥ 1, including m < k) — Bakshi et al. Alg 7 (Theorem 11),
// [BJW19, Alg 7]. A sample that activates only unit i has output
// y_q = ReLU(v_i·x_q)·U_{:,i}, a positive multiple of column i; rows with
// two or more active units lie inside a cone and are generically collinear
// with nothing. So:
//
//  1. CollinearClasses groups the non-zero rows of Y by direction (c > 0
//     only, erratum §8.6).
//  2. Each class with ≥ d members is one unit: ‖y_q‖ = x_q·(‖U_{:,i}‖·v_i)
//     is a consistent linear system in w = ‖U_{:,i}‖·v_i, solved by QR least
//     squares over all members; V's row is w/‖w‖.
//  3. U is the least-squares solution of Y = ReLU(X·Vᵀ)·Uᵀ, and the relative
//     residual over all samples is the certificate.
//
// Assumptions (Thm 11): Gaussian X, V* of rank k with unit rows, and no two
// columns of U* positive multiples of each other (u and −u are fine). Two
// positively collinear columns merge into one class whose samples do not fit
// one linear w; this is detected and reported as an error wrapping ErrInput,
// never as a wrong answer. Sample size: each class needs ≥ d members; for
// orthonormal V* a class expects n/2^k, so FPTMinSamples(d, k) = 4·d·2^k is
// the default floor. With Hidden given, n < d·2^k is refused before any work
// and n < 4·d·2^k gives a warning; with Hidden 0, k is the number of classes
// with ≥ d members and a class with fewer is refused (it is a unit seen too
// rarely). Deviations from the paper: (1) all members of a class enter one
// least-squares solve whose residual is checked, which is what catches
// merged classes; (2) the paper's "a row with ≥ 2 active units is collinear
// with no other row" fails when u and −u are both columns (rows with just
// those two units active lie on the same line, 2^{-k} of the samples), so
// such a pair of classes is solved jointly by fitPair.
func FitFPT(ctx context.Context, X, Y *mat.Dense, opt FPTOptions) (*Result, error) {
	if err := opt.validateRoute(); err != nil {
		return nil, err
	}
	p, err := newProblem(X, Y)
	if err != nil {
		return nil, err
	}
	return fitFPT(ctx, p, opt)
}

// fitFPT is FitFPT on a resolved problem.
func fitFPT(ctx context.Context, p *problem, opt FPTOptions) (*Result, error) {
	began := time.Now()
	X, Y, n, d, m := p.X, p.Y, p.n, p.d, p.m
	if opt.CollinearTol <= 0 {
		opt.CollinearTol = 1e-9
	}
	opt.Options = opt.Options.resolve(p)
	f := &fptRun{p: p, opt: opt, res: &Result{Route: RouteFPT}}
	res := f.res
	if err := f.checkSampleFloor(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opt.progress("collinearity classes", 0, 1)
	var err error
	if f.classes, f.zeros, err = CollinearClasses(Y, opt.CollinearTol); err != nil {
		return nil, err
	}
	opt.progress("collinearity classes", 1, 1)
	// Classes of two members can be coincidences when m is small (n²·tol
	// pairs of random directions collide on the circle for m = 2); three or
	// more agreeing to 1e-9 cannot, so those are units seen too rarely.
	for _, c := range f.classes {
		switch {
		case len(c.Members) >= d:
			f.big = append(f.big, c)
		case len(c.Members) >= 3:
			f.smallSizes = append(f.smallSizes, len(c.Members))
		}
	}
	V, err := f.classRows(ctx)
	if err != nil {
		return nil, err
	}
	k := len(f.big)
	if err := f.checkWidth(); err != nil {
		return nil, err
	}
	normalizeRows(V)

	// U by QR least squares on the activations, computed once for the solve,
	// κ(F) and the certificate.
	F := activations(X, V)
	Ut, err := linalg.LstSq(F, Y)
	if err != nil {
		return nil, fmt.Errorf("%w: the hidden activations of the %d units found are rank deficient (%v)", ErrNotExact, k, err)
	}
	U := mat.DenseCopyOf(Ut.T())
	condF := linalg.Cond(F)
	resid := residualOf(F, Y, U)
	res.Certificate = Certificate{Residual: resid, Tol: opt.CertTol, Samples: n, Met: resid <= opt.CertTol}
	if !res.Certificate.Met {
		return nil, fmt.Errorf("%w: the %d units found (class sizes %v) leave a relative residual %.1e > %.0e: a hidden unit may be missing (seen alone on < 2 samples; needs n ≥ 4·d·2^k), two units may have positively collinear output weights, or Y is noisy", ErrNotExact, k, classSizes(f.big), resid, opt.CertTol)
	}
	res.Model = nn.NewTwoLayer(V, U).Canonical()
	diag := &res.Diagnostics
	diag.Hidden, diag.HiddenInferred = k, opt.Hidden == 0
	diag.PolishedUnits = k
	diag.CondF = condF
	res.Reason = fmt.Sprintf("%d output directions each occur on ≥ d = %d samples with a single active unit (class sizes %v; %d zero rows; m = %d, rank(U) need not be k) and each fits one hidden row exactly; residual %.1e ≤ %.0e",
		k, d, classSizes(f.big), f.zeros, m, resid, opt.CertTol)
	res.Elapsed = time.Since(began)
	return res, nil
}

// fptRun holds the state fitFPT's steps share: the problem and options,
// the result being filled in, and the collinearity classes of Y's rows
// (Alg 7 steps 1–2).
type fptRun struct {
	p   *problem
	opt FPTOptions
	res *Result
	// classes are all classes of ≥ 2 collinear rows, big those with ≥ d
	// members (the units), smallSizes the sizes of those with 3 to d − 1.
	classes    []CollinearClass
	big        []CollinearClass
	smallSizes []int
	zeros      int
}

// classSizes lists the number of members of each class, for messages.
func classSizes(cs []CollinearClass) []int {
	s := make([]int, len(cs))
	for i, c := range cs {
		s[i] = len(c.Members)
	}
	return s
}

// checkSampleFloor refuses, with Hidden given, fewer than d·2^k samples
// (a unit would be seen alone on fewer than d), and warns below the
// recommended FPTMinSamples.
func (f *fptRun) checkSampleFloor() error {
	n, d := f.p.n, f.p.d
	if k := f.opt.Hidden; k > 0 {
		need := FPTMinSamples(d, k)
		if floor := need / 4; n < floor {
			return fmt.Errorf("%w: the FPT route needs n ≥ 4·d·2^k = %d samples for d=%d, k=%d (orthonormal V*; more if V* is ill-conditioned), got %d: with fewer than d·2^k = %d, a unit is expected to be seen alone on fewer than d samples", ErrInput, need, d, k, n, floor)
		}
		if n < need {
			f.res.Warnings = append(f.res.Warnings, errs.Textf("n = %d is below the recommended 4·d·2^k = %d samples; some unit may be seen alone on fewer than d = %d samples", n, need, d))
		}
	}
	return nil
}

// classRows is Alg 7 step 3, per class: w from ‖y_q‖ = x_q·w. A merged
// class (two units with positively collinear output weights) does not fit
// one w. A class whose antipodal class also exists (columns u and −u)
// additionally holds the samples where both units are active,
// y = (f(x·a) − f(x·b))·u; those lie strictly below the singles'
// hyperplane, which is then found as the upper envelope (fitEnvelope).
func (f *fptRun) classRows(ctx context.Context) (*mat.Dense, error) {
	X, Y, n, d, opt, big, classes := f.p.X, f.p.Y, f.p.n, f.p.d, f.opt, f.big, f.classes
	k := len(big)
	V := mat.NewDense(max(k, 1), d, nil)
	done := make([]bool, k)
	for i, c := range big {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if done[i] {
			continue
		}
		w, fit, err := fitClass(X, Y, c.Members)
		if err != nil {
			return nil, fmt.Errorf("%w: the %d samples of class %d do not determine a hidden row (%v); X must have full column rank on them", ErrInput, len(c.Members), i, err)
		}
		if j := antipode(c, big); fit > classFitTol && j >= 0 && !done[j] {
			a, b, pfit := fitPair(X, Y, c.Members, big[j].Members)
			if pfit <= classFitTol {
				V.SetRow(j, b)
				done[j] = true
				w, fit = a, pfit
				f.res.Warnings = append(f.res.Warnings, errs.Textf("output directions %s and its opposite are both columns of U*: the samples where both units are active were separated by the alternating pair fit", fmtVec(c.Direction)))
			}
		}
		if j := antipode(c, classes); fit > classFitTol && j >= 0 {
			kk := max(opt.Hidden, len(big)+len(f.smallSizes))
			return nil, fmt.Errorf("%w: needs n ≥ 4·d·2^k = %d samples for d=%d, k=%d, got %d: outputs along %s and its opposite (columns u and −u of U*) share a line, and separating the two units needs ≥ d = %d samples where each is active alone; the two classes have %d and %d samples and do not yet determine them (relative residual %.1e)",
				ErrInput, FPTMinSamples(d, kk), d, kk, n, fmtVec(c.Direction), d, len(c.Members), len(classes[j].Members), fit)
		}
		if fit > classFitTol {
			return nil, fmt.Errorf("%w: the %d samples whose outputs point along %s do not fit one hidden unit (relative residual %.1e > %.0e): two hidden units have positively collinear output weights (columns of U* that are positive multiples of each other), which Alg 7 cannot separate (Thm 11 assumes they do not occur); or Y is noisy, which this exact route does not handle",
				ErrInput, len(c.Members), fmtVec(c.Direction), fit, classFitTol)
		}
		V.SetRow(i, w)
		done[i] = true
		opt.progress("class fits", i+1, k)
	}
	return V, nil
}

// checkWidth refuses a set of classes that does not give the hidden width:
// none with ≥ d members, a number other than Options.Hidden, or (width
// inferred) units seen alone on fewer than d samples; with Hidden given,
// small classes left out are a warning.
func (f *fptRun) checkWidth() error {
	n, d, opt, big, smallSizes := f.p.n, f.p.d, f.opt, f.big, f.smallSizes
	k := len(big)
	if k == 0 {
		return fmt.Errorf("%w: no output direction occurs on ≥ d = %d samples (%d classes of collinear rows, sizes %v; %d zero rows): too few samples, noisy Y, or not a two-layer ReLU network; the FPT route needs n ≥ 4·d·2^k", ErrInput, d, len(f.classes), classSizes(f.classes), f.zeros)
	}
	if want := opt.Hidden; want > 0 && k != want {
		switch {
		case k < want && k+len(smallSizes) >= want:
			return fmt.Errorf("%w: needs n ≥ 4·d·2^k = %d samples for d=%d, k=%d, got %d: only %d output directions occur on ≥ d samples (sizes %v) and %d more on fewer (sizes %v)", ErrInput, FPTMinSamples(d, want), d, want, n, k, classSizes(big), len(smallSizes), smallSizes)
		case k < want:
			return fmt.Errorf("%w: found %d classes of positively collinear output rows (sizes %v), expected k = %d: two hidden units may have positively collinear output weights (merged into one class), a column of U* may be zero, or there are too few samples (the FPT route needs n ≥ 4·d·2^k = %d, got %d)", ErrInput, k, classSizes(big), want, FPTMinSamples(d, want), n)
		default:
			return fmt.Errorf("%w: found %d classes of positively collinear output rows with ≥ d samples (sizes %v), more than k = %d: the width is wrong or the data are not a two-layer ReLU network", ErrInput, k, classSizes(big), want)
		}
	}
	if opt.Hidden == 0 && len(smallSizes) > 0 {
		return fmt.Errorf("%w: needs n ≥ 4·d·2^k = %d samples for d=%d, k=%d, got %d: %d output directions occur on ≥ d samples (sizes %v) but %d more occur on fewer than d (sizes %v), so some hidden units cannot be solved; pass more samples (or Hidden if those classes are spurious)", ErrInput, FPTMinSamples(d, k+len(smallSizes)), d, k+len(smallSizes), n, k, classSizes(big), len(smallSizes), smallSizes)
	}
	if opt.Hidden > 0 && len(smallSizes) > 0 {
		f.res.Warnings = append(f.res.Warnings, errs.Textf("%d small classes of collinear rows (sizes %v) were ignored", len(smallSizes), smallSizes))
	}
	return nil
}

// fmtVec prints a short vector for messages.
func fmtVec(v []float64) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, x := range v {
		if i == 4 && len(v) > 5 {
			fmt.Fprintf(&b, ", … %d more", len(v)-4)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.3g", x)
	}
	b.WriteByte(')')
	return b.String()
}
