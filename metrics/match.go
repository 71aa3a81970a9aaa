package metrics

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/scaledsum"
)

// Sentinel errors; every error from this package wraps one of them.
var (
	// ErrShape reports nil, empty or mismatched matrices or networks.
	ErrShape = errs.New("metrics: bad shape", nil)
	// ErrNotFinite reports a NaN or Inf weight.
	ErrNotFinite = errs.New("metrics: NaN or Inf entry", nil)
	// ErrZeroRow reports a zero row of V: a dead hidden unit has no
	// direction, so it cannot be matched up to positive scaling.
	ErrZeroRow = errs.New("metrics: zero row", nil)
	// ErrNotTwoLayer reports a network that is not a bias-free two-layer
	// ReLU network (Linear → ReLU → Linear).
	ErrNotTwoLayer = errs.New("metrics: not a bias-free two-layer ReLU network", nil)
)

// MatchRows returns the assignment of rows of est to rows of truth that
// maximises the total cosine similarity Σ_i cos(truth_i, est_perm[i]):
// perm[i] is the index of the est row matched to truth row i. Rows are
// directions (both matrices are row-normalised internally), so positive
// scaling does not matter but sign does: a row and its negation have cosine
// −1 and are matched only if nothing better exists.
//
// truth is k×d and est is k'×d with k ≤ k' (extra est rows stay unmatched).
// The assignment is optimal (Hungarian algorithm, O(k²·k')), not greedy,
// because greedy matching mislabels nearly parallel units, exactly the
// ill-conditioned instances the experiments care about. Zero rows give an
// error wrapping ErrZeroRow.
func MatchRows(truth, est *mat.Dense) ([]int, error) {
	t, err := unitRows("truth", truth)
	if err != nil {
		return nil, fmt.Errorf("metrics.MatchRows: %w", err)
	}
	e, err := unitRows("est", est)
	if err != nil {
		return nil, fmt.Errorf("metrics.MatchRows: %w", err)
	}
	k, d := t.Dims()
	ke, de := e.Dims()
	if d != de || k > ke {
		return nil, fmt.Errorf("metrics.MatchRows: %w: truth is %d×%d, est is %d×%d (need the same columns and at least as many est rows)", ErrShape, k, d, ke, de)
	}
	var cos mat.Dense
	cos.Mul(t, e.T())
	cost := make([][]float64, k)
	for i := range cost {
		cost[i] = make([]float64, ke)
		for j := range cost[i] {
			cost[i][j] = -cos.At(i, j)
		}
	}
	return hungarian(cost), nil
}

// unitRows returns a copy of m with every row scaled to unit Euclidean norm.
func unitRows(name string, m *mat.Dense) (*mat.Dense, error) {
	out, _, err := normaliseRows(name, m)
	return out, err
}

// normaliseRows returns m with unit rows and the original row norms.
func normaliseRows(name string, m *mat.Dense) (*mat.Dense, []float64, error) {
	if m == nil {
		return nil, nil, fmt.Errorf("%w: %s is nil", ErrShape, name)
	}
	r, c := m.Dims()
	if r == 0 || c == 0 {
		return nil, nil, fmt.Errorf("%w: %s is empty", ErrShape, name)
	}
	out := mat.NewDense(r, c, nil)
	norms := make([]float64, r)
	for i := 0; i < r; i++ {
		row := m.RawRowView(i)
		for j, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, nil, fmt.Errorf("%w: %s[%d,%d] = %v", ErrNotFinite, name, i, j, x)
			}
		}
		n := norm2(row)
		if n == 0 {
			return nil, nil, fmt.Errorf("%w: %s row %d is zero", ErrZeroRow, name, i)
		}
		norms[i] = n
		dst := out.RawRowView(i)
		for j, x := range row {
			dst[j] = x / n
		}
	}
	return out, norms, nil
}

// norm2 is the Euclidean norm without overflow or underflow (scaled sum of
// squares, as LAPACK's dnrm2).
func norm2(x []float64) float64 {
	var s scaledsum.Sum
	for _, v := range x {
		s.Add(v)
	}
	return s.Norm()
}

// hungarian solves the rectangular assignment problem: for an n×m cost
// matrix with n ≤ m it returns p with p[i] the column assigned to row i,
// minimising Σ cost[i][p[i]] over injective assignments. It is the
// shortest-augmenting-path form with potentials (Kuhn–Munkres, Jonker–
// Volgenant), O(n²·m); ties are broken by the lowest column index, so the
// result is deterministic.
func hungarian(cost [][]float64) []int {
	n := len(cost)
	m := len(cost[0])
	inf := math.Inf(1)
	// 1-based arrays; column 0 is a virtual start column.
	u := make([]float64, n+1)
	v := make([]float64, m+1)
	p := make([]int, m+1) // p[j]: row assigned to column j (0 = none)
	way := make([]int, m+1)
	minv := make([]float64, m+1)
	used := make([]bool, m+1)
	for i := 1; i <= n; i++ {
		p[0] = i
		j0 := 0
		for j := range minv {
			minv[j] = inf
			used[j] = false
		}
		for {
			used[j0] = true
			i0 := p[j0]
			delta := inf
			j1 := -1
			for j := 1; j <= m; j++ {
				if used[j] {
					continue
				}
				cur := cost[i0-1][j-1] - u[i0] - v[j]
				if cur < minv[j] {
					minv[j] = cur
					way[j] = j0
				}
				if minv[j] < delta {
					delta = minv[j]
					j1 = j
				}
			}
			for j := 0; j <= m; j++ {
				if used[j] {
					u[p[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if p[j0] == 0 {
				break
			}
		}
		for j0 != 0 {
			j1 := way[j0]
			p[j0] = p[j1]
			j0 = j1
		}
	}
	perm := make([]int, n)
	for j := 1; j <= m; j++ {
		if p[j] != 0 {
			perm[p[j]-1] = j - 1
		}
	}
	return perm
}

// MaxAngle returns the largest angle (radians, in [0, π]) between truth row
// i and est row perm[i] over all i. It returns NaN when the shapes or perm do
// not fit, or a row is zero or non-finite. The angle is computed as
// 2·atan2(‖a−b‖, ‖a+b‖) for unit a, b, which is accurate at every angle
// (arccos of the dot product loses half the digits near 0 and π).
func MaxAngle(truth, est *mat.Dense, perm []int) float64 {
	t, err := unitRows("truth", truth)
	if err != nil {
		return math.NaN()
	}
	e, err := unitRows("est", est)
	if err != nil {
		return math.NaN()
	}
	k, d := t.Dims()
	ke, de := e.Dims()
	if d != de || len(perm) != k {
		return math.NaN()
	}
	worst := 0.0
	for i, j := range perm {
		if j < 0 || j >= ke {
			return math.NaN()
		}
		worst = math.Max(worst, angle(t.RawRowView(i), e.RawRowView(j)))
	}
	return worst
}

// angle between unit vectors a and b.
func angle(a, b []float64) float64 {
	var dm, dp scaledsum.Sum
	for i := range a {
		dm.Add(a[i] - b[i])
		dp.Add(a[i] + b[i])
	}
	return 2 * math.Atan2(dm.Norm(), dp.Norm())
}
