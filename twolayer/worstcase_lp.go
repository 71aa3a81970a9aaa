package twolayer

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/relurec/relurec/linalg"
)

// Alg 1 of [BJW19] (IterativeLP) in the reduced (w, z) coordinates: the
// linear programs that find one hidden unit for a candidate sign pattern.

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

// nullBasis returns an orthonormal basis ((r+k)×p) of the solutions (a, z) of
// the equality constraints of Alg 1 for pattern S — (Ux·a)_j = (B·z)_j on S,
// (B·z)_j = 0 off S — or nil when only 0 solves them. Parametrising the LP by
// this null space drops the redundant equality rows exactly: the LP keeps
// only inequalities, whose slacks give gonum's simplex a full-rank constraint
// matrix.
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

// iterativeLP is Alg 1 in the (w, z) form of [BJW19, Alg 1] for one pattern
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

// IterativeLP is Bakshi et al. Alg 1 in the reduced (w, z) form of [BJW19]
// §2.2: it looks for w ∈ R^d and z ∈ R^k with (X·w)_j ≥ 1 on S, ≤ 0 off S,
// ReLU(X·w) = B·z (the activation lies in col(B) = col(Y)) and z outside the
// span of the previous prevZ. The paper's independence constraint
// f_S(y)(I − P) ≠ 0 is equivalent to z ∉ span(prevZ) because B has full
// column rank, so 2(k − i + 1) LPs with (Nᵀz)_t ≥ 1 or ≤ −1 replace the
// paper's 2n (Remark 1), N an orthonormal basis of span(prevZ)^⊥. The paper's
// projection Qᵀ(QᵀQ)⁻¹Q is a typo for Qᵀ(QQᵀ)⁻¹Q (an erratum of [BJW19]); it is not
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
