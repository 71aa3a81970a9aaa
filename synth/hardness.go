package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// This file holds the two "negative" instance generators of Bakshi et al.
// ([BJW19, Lemma 16 and Thm 2]): the Lemma 16 pair that no algorithm can
// tell apart from few Gaussian samples, and the NP-hardness reduction of
// Thm 2 from reversible 6-SAT. Row convention as everywhere: samples are the
// rows of X, and the paper's column X_{*,q} is row q here.

// Lemma16Pair returns the two networks of Bakshi et al. Lemma 16 for a ∈
// (0, 1]: nn.NewTwoLayer(V¹, U¹) with V¹ = [[1, a], [1, −a]]/√(1+a²) and
// U¹ = [√(1+a²)/2, √(1+a²)/2], and the same with 2a in place of a. Both
// compute x ↦ (ReLU(x₁ + aᵢx₂) + ReLU(x₁ − aᵢx₂))/2, which equals ReLU(x₁)
// whenever |x₁| ≥ aᵢ|x₂|; so on Gaussian inputs a sample tells them apart only
// when |x₁| < 2a|x₂|, with probability Lemma16DistinguishProb(a) ≈ 4a/π,
// while κ(V¹) = 1/a: exact recovery needs n = Ω(κ) samples.
//
// The paper's second V has first row (1, a)/√(1+4a²), which is not a unit
// vector; the row meant is (1, 2a)/√(1+4a²) (an erratum of [BJW19, Lemma 16]). Both networks
// have m = 1 output and k = 2 units, so U (1×2) has rank 1 < k — outside the
// full-column-rank setting of the exact routes, as is to be expected.
func Lemma16Pair(a float64) (first, second *nn.MLP, err error) {
	if !(a > 0 && a <= 1) || math.IsInf(a, 0) {
		return nil, nil, fmt.Errorf("%w: Lemma 16 needs a in (0, 1], got %v", ErrConfig, a)
	}
	mk := func(a float64) *nn.MLP {
		s := math.Sqrt(1 + a*a)
		V := mat.NewDense(2, 2, []float64{1 / s, a / s, 1 / s, -a / s})
		U := mat.NewDense(1, 2, []float64{s / 2, s / 2})
		return nn.NewTwoLayer(V, U)
	}
	return mk(a), mk(2 * a), nil
}

// Lemma16Distinguishes reports whether the sample (x₁, x₂) gives different
// outputs under the two networks of Lemma16Pair(a): exactly when
// |x₁| < 2a·|x₂|.
func Lemma16Distinguishes(x1, x2, a float64) bool {
	return math.Abs(x1) < 2*a*math.Abs(x2)
}

// Lemma16DistinguishProb returns P[|x₁| < 2a|x₂|] = (2/π)·arctan(2a) for
// independent standard Gaussians x₁, x₂: the chance that one sample tells the
// two networks of Lemma16Pair(a) apart.
func Lemma16DistinguishProb(a float64) float64 {
	return 2 / math.Pi * math.Atan(2*a)
}

// Clause is a disjunction of literals in the DIMACS convention: literal +v
// means variable v (1-based) is true, −v that it is false.
type Clause []int

// Formula is a CNF formula over variables 1..Vars.
type Formula struct {
	Vars    int
	Clauses []Clause
}

// Check validates the formula: every literal is a non-zero ±v with v ≤ Vars,
// no clause repeats a variable, and, when width > 0, every clause has
// exactly width literals.
func (f Formula) Check(width int) error {
	if f.Vars < 1 {
		return fmt.Errorf("%w: a formula needs at least one variable, got %d", ErrConfig, f.Vars)
	}
	for ci, c := range f.Clauses {
		if width > 0 && len(c) != width {
			return fmt.Errorf("%w: clause %d has %d literals, want %d", ErrConfig, ci, len(c), width)
		}
		seen := map[int]bool{}
		for _, l := range c {
			v := abs(l)
			if l == 0 || v > f.Vars {
				return fmt.Errorf("%w: clause %d has literal %d; literals are ±v with 1 ≤ v ≤ %d", ErrConfig, ci, l, f.Vars)
			}
			if seen[v] {
				return fmt.Errorf("%w: clause %d uses variable %d twice", ErrConfig, ci, v)
			}
			seen[v] = true
		}
	}
	return nil
}

// Complement returns ψ̄: every literal negated (Bakshi et al. §3).
func (f Formula) Complement() Formula {
	g := Formula{Vars: f.Vars, Clauses: make([]Clause, len(f.Clauses))}
	for i, c := range f.Clauses {
		g.Clauses[i] = negate(c)
	}
	return g
}

// ClosedUnderComplement reports whether the complement of every clause is
// also a clause (as a set of literals). Such a formula is reversible in the
// sense of Bakshi et al. Def 4, and it is the only kind for which their
// reduction is sound as written (checked here).
func (f Formula) ClosedUnderComplement() bool {
	set := map[string]bool{}
	for _, c := range f.Clauses {
		set[clauseKey(c)] = true
	}
	for _, c := range f.Clauses {
		if !set[clauseKey(negate(c))] {
			return false
		}
	}
	return true
}

// Satisfies reports whether the assignment (assign[v−1] is variable v)
// makes every clause true.
func (f Formula) Satisfies(assign []bool) bool {
	if len(assign) != f.Vars {
		return false
	}
	for _, c := range f.Clauses {
		ok := false
		for _, l := range c {
			if assign[abs(l)-1] == (l > 0) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func negate(c Clause) Clause {
	d := make(Clause, len(c))
	for i, l := range c {
		d[i] = -l
	}
	return d
}

func clauseKey(c Clause) string {
	s := slices.Clone(c)
	slices.Sort(s)
	return fmt.Sprint(s)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// PlantedReversible6SAT draws a 6-SAT formula over vars variables that is
// closed under clause complementation and satisfied by a planted assignment,
// which it returns too. It draws pairs clauses and appends each one's
// complement, so the formula has 2·pairs clauses. A clause and its complement
// are both satisfied by an assignment exactly when the clause has a true
// and a false literal under it, so clauses whose six literals are all true or
// all false under the plant are redrawn. The complement of the plant then
// satisfies the formula as well.
//
// Draw order from rng: the plant (vars Booleans, rng.IntN(2) each), then per
// clause 6 distinct variables by a partial Fisher–Yates shuffle of 1..vars
// (rng.IntN) and 6 sign bits (rng.IntN(2)), redrawing the whole clause when
// rejected.
func PlantedReversible6SAT(vars, pairs int, rng *rand.Rand) (Formula, []bool, error) {
	if vars < 6 || pairs < 1 {
		return Formula{}, nil, fmt.Errorf("%w: a 6-SAT formula needs at least 6 variables and one clause pair, got %d variables and %d pairs", ErrConfig, vars, pairs)
	}
	if rng == nil {
		return Formula{}, nil, fmt.Errorf("%w: rng is nil", ErrConfig)
	}
	plant := make([]bool, vars)
	for i := range plant {
		plant[i] = rng.IntN(2) == 1
	}
	f := Formula{Vars: vars}
	perm := make([]int, vars)
	for len(f.Clauses) < 2*pairs {
		for i := range perm {
			perm[i] = i + 1
		}
		c := make(Clause, 6)
		nTrue := 0
		for i := range c {
			j := i + rng.IntN(vars-i)
			perm[i], perm[j] = perm[j], perm[i]
			c[i] = perm[i]
			if rng.IntN(2) == 1 {
				c[i] = -c[i]
			}
			if plant[abs(c[i])-1] == (c[i] > 0) {
				nTrue++
			}
		}
		if nTrue == 0 || nTrue == 6 {
			continue
		}
		f.Clauses = append(f.Clauses, c, negate(c))
	}
	return f, plant, nil
}

// HardnessInstance is an instance (X, Y) of the exact-factorisation problem
// "is there V with ReLU(X·Vᵀ)·αᵀ = Y" built from a reversible 6-SAT formula
// by the reduction of Bakshi et al. Prop 2 and Thm 2, with α = [1, 1].
type HardnessInstance struct {
	// X is n×d: the clause points P (rows 0..NumP−1), then the points Q that
	// force the truth-value and offset coordinates; with VariableAlpha also
	// two rows ±e_{d}. d = Vars + 2 (+1 with VariableAlpha).
	X *mat.Dense
	// Y is n×1: 0 on P, 1 on Q (and on the two extra rows).
	Y *mat.Dense
	// NumP is the number of clause points; Vars the number of variables.
	NumP, Vars int
	// VariableAlpha marks the Thm 2 variant where α is unknown too.
	VariableAlpha bool
}

// SATReduction builds the instance of Bakshi et al. Prop 2 / Thm 2 ([BJW19,
// §3]) from a formula with 6-literal clauses, closed under complementation.
// With d = Vars + 2, in row convention:
//
//   - for each clause with literal signs s on its variables, the point with
//     −s on those coordinates and −10 on coordinates Vars+1 and Vars+2, target
//     0 (it encodes Σ sᵢxᵢ ≥ −5, "not all six literals false");
//   - ±e_i for every variable (forcing x_i = −y_i ∈ {±1}), and e_{n+1},
//     e_{n+2}, −2e_{n+1}, −2e_{n+2}, e_{n+1}+e_{n+2} (forcing the offset
//     x_{n+1} + x_{n+2} = y_{n+1} + y_{n+2} = 1/2), target 1.
//
// A V = [x; y] (2×d) with ReLU(X·Vᵀ)·[1, 1]ᵀ = Y exists iff the formula is
// satisfiable; Witness builds it from a satisfying assignment. With
// variableAlpha, X gains a zero column and the rows ±e_{d+1} with target 1,
// which force both output weights positive, so α may be unknown as well (the
// paper writes A' ∈ R^{r+s+4}; it has r+s+2 entries).
func SATReduction(f Formula, variableAlpha bool) (*HardnessInstance, error) {
	if err := f.Check(6); err != nil {
		return nil, err
	}
	if len(f.Clauses) == 0 {
		return nil, fmt.Errorf("%w: the formula has no clauses", ErrConfig)
	}
	if !f.ClosedUnderComplement() {
		return nil, fmt.Errorf("%w: the reduction needs a formula closed under clause complementation (each clause's negation is also a clause); see PlantedReversible6SAT", ErrConfig)
	}
	nv := f.Vars
	rows, d := SATReductionShape(nv, len(f.Clauses), variableAlpha)
	X := mat.NewDense(rows, d, nil)
	Y := mat.NewDense(rows, 1, nil)
	r := 0
	for _, c := range f.Clauses {
		for _, l := range c {
			s := 1.0
			if l < 0 {
				s = -1
			}
			X.Set(r, abs(l)-1, -s)
		}
		X.Set(r, nv, -10)
		X.Set(r, nv+1, -10)
		r++
	}
	q := func(vals map[int]float64) {
		for j, v := range vals {
			X.Set(r, j, v)
		}
		Y.Set(r, 0, 1)
		r++
	}
	for i := 0; i < nv; i++ {
		q(map[int]float64{i: 1})
		q(map[int]float64{i: -1})
	}
	q(map[int]float64{nv: 1})
	q(map[int]float64{nv + 1: 1})
	q(map[int]float64{nv: -2})
	q(map[int]float64{nv + 1: -2})
	q(map[int]float64{nv: 1, nv + 1: 1})
	if variableAlpha {
		q(map[int]float64{d - 1: 1})
		q(map[int]float64{d - 1: -1})
	}
	return &HardnessInstance{X: X, Y: Y, NumP: len(f.Clauses), Vars: nv, VariableAlpha: variableAlpha}, nil
}

// SATReductionShape returns the shape of the X that SATReduction builds
// from a formula of clauses clauses over vars variables, so that a caller
// can size it before building it: a row per clause and 2·vars + 5 forcing
// rows, vars + 2 columns (two more rows and one more column with
// variableAlpha).
func SATReductionShape(vars, clauses int, variableAlpha bool) (rows, cols int) {
	rows, cols = clauses+2*vars+5, vars+2
	if variableAlpha {
		rows, cols = rows+2, cols+1
	}
	return rows, cols
}

// Witness returns the network nn.NewTwoLayer(V, [1, 1]) that the reduction
// maps a truth assignment to: V = [x; y] with x = (ξ, 1, −1/2) and
// y = (−ξ, −1/2, 1), ξ_i = ±1 ([BJW19, Prop 2]), and with
// VariableAlpha a last column (1, −1). It reproduces Y exactly (all values
// are small dyadic numbers, so exactly in floating point too) iff the
// assignment satisfies the formula.
func (h *HardnessInstance) Witness(assign []bool) (*nn.MLP, error) {
	if len(assign) != h.Vars {
		return nil, fmt.Errorf("%w: the assignment has %d values for %d variables", ErrShape, len(assign), h.Vars)
	}
	_, d := h.X.Dims()
	V := mat.NewDense(2, d, nil)
	for i, b := range assign {
		xi := -1.0
		if b {
			xi = 1
		}
		V.Set(0, i, xi)
		V.Set(1, i, -xi)
	}
	nv := h.Vars
	V.Set(0, nv, 1)
	V.Set(0, nv+1, -0.5)
	V.Set(1, nv, -0.5)
	V.Set(1, nv+1, 1)
	if h.VariableAlpha {
		V.Set(0, d-1, 1)
		V.Set(1, d-1, -1)
	}
	return nn.NewTwoLayer(V, mat.NewDense(1, 2, []float64{1, 1})), nil
}
