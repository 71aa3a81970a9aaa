package tensor

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"gonum.org/v1/gonum/mat"
)

// Symmetric is a symmetric tensor of order Order on R^Dim that stores only
// its C(Dim+Order−1, Order) distinct entries — the moment tensors of
// [ATV21]: an order-6 tensor on R^20 has 177 100 distinct entries
// instead of 6.4·10⁷. Entry (i_1, …, i_k) is stored once, at the rank of its
// sorted multi-index i_1 ≤ … ≤ i_k in lexicographic order; any permutation
// of the indices addresses the same entry.
type Symmetric struct {
	Dim, Order int
	// Data holds the distinct entries in lexicographic order of the sorted
	// multi-indices (see ForEach).
	Data []float64
}

// symIndex holds the ranking tables of one (Dim, Order).
type symIndex struct {
	dim, order int
	// prefix[r][v] = Σ_{u<v} C(dim−u+r−1, r): the number of sorted
	// multi-indices whose position with r positions left to fill starts
	// below v.
	prefix [][]int
}

func newSymIndex(dim, order int) *symIndex {
	s := &symIndex{dim: dim, order: order, prefix: make([][]int, order+1)}
	for r := 0; r <= order; r++ {
		p := make([]int, dim+1)
		for v := 0; v < dim; v++ {
			p[v+1] = p[v] + SymLen(dim-v, r)
		}
		s.prefix[r] = p
	}
	return s
}

// rank of a sorted multi-index.
func (s *symIndex) rank(idx []int) int {
	k := len(idx)
	r, lo := 0, 0
	for j, v := range idx {
		p := s.prefix[k-j-1]
		r += p[v] - p[lo]
		lo = v
	}
	return r
}

// SymLen returns C(dim+order−1, order), the number of distinct entries of a
// symmetric tensor of the given order on R^dim (1 for order 0).
func SymLen(dim, order int) int {
	if order == 0 {
		return 1
	}
	if dim <= 0 {
		return 0
	}
	// C(n, r) with n = dim+order−1, r = order, computed exactly.
	n, r := dim+order-1, order
	if r > n-r {
		r = n - r
	}
	c := 1
	for i := 1; i <= r; i++ {
		c = c * (n - r + i) / i
	}
	return c
}

// NewSymmetric returns a zero symmetric tensor of the given order on R^dim.
// It panics if dim < 1 or order < 0 (programming errors).
func NewSymmetric(dim, order int) *Symmetric {
	if dim < 1 || order < 0 {
		panic(fmt.Sprintf("tensor: NewSymmetric(%d, %d)", dim, order))
	}
	return &Symmetric{Dim: dim, Order: order, Data: make([]float64, SymLen(dim, order))}
}

// symIndexes caches the ranking tables per (dim, order); they are read-only
// once built, so tensors can be read from many goroutines.
var symIndexes sync.Map

func (t *Symmetric) index() *symIndex {
	key := [2]int{t.Dim, t.Order}
	if v, ok := symIndexes.Load(key); ok {
		return v.(*symIndex)
	}
	v, _ := symIndexes.LoadOrStore(key, newSymIndex(t.Dim, t.Order))
	return v.(*symIndex)
}

// Len is the number of distinct entries.
func (t *Symmetric) Len() int { return len(t.Data) }

// Clone returns a deep copy.
func (t *Symmetric) Clone() *Symmetric {
	return &Symmetric{Dim: t.Dim, Order: t.Order, Data: slices.Clone(t.Data)}
}

// Pos returns the storage position of the entry at the multi-index idx (in
// any order). It panics on a wrong length or an index out of range.
func (t *Symmetric) Pos(idx ...int) int {
	if len(idx) != t.Order {
		panic(fmt.Sprintf("tensor: %d indices for an order-%d tensor", len(idx), t.Order))
	}
	s := idx
	if !slices.IsSorted(idx) {
		s = slices.Clone(idx)
		slices.Sort(s)
	}
	if len(s) > 0 && (s[0] < 0 || s[len(s)-1] >= t.Dim) {
		panic(fmt.Sprintf("tensor: index %v out of range for dimension %d", idx, t.Dim))
	}
	return t.index().rank(s)
}

// At returns the entry at idx (any permutation).
func (t *Symmetric) At(idx ...int) float64 { return t.Data[t.Pos(idx...)] }

// Set sets the entry at idx (and so at every permutation of it).
func (t *Symmetric) Set(v float64, idx ...int) { t.Data[t.Pos(idx...)] = v }

// ForEach calls f for every distinct entry in storage order with its
// position and sorted multi-index (f must not keep idx).
func (t *Symmetric) ForEach(f func(pos int, idx []int)) {
	forEachSorted(t.Dim, t.Order, f)
}

// forEachSorted enumerates the sorted multi-indices of length order over
// [0, dim) in lexicographic order.
func forEachSorted(dim, order int, f func(pos int, idx []int)) {
	idx := make([]int, order)
	for pos := 0; ; pos++ {
		f(pos, idx)
		j := order - 1
		for j >= 0 && idx[j] == dim-1 {
			j--
		}
		if j < 0 {
			return
		}
		idx[j]++
		for l := j + 1; l < order; l++ {
			idx[l] = idx[j]
		}
	}
}

// Multiplicity returns k!/Π_j n_j!, the number of index tuples that a sorted
// multi-index stands for (n_j the number of times j occurs).
func Multiplicity(idx []int) float64 {
	m := 1.0
	run := 0
	for i := range idx {
		if i > 0 && idx[i] == idx[i-1] {
			run++
		} else {
			run = 1
		}
		m *= float64(i+1) / float64(run)
	}
	return m
}

// Norm is the Frobenius norm of the full tensor: each distinct entry counts
// with its multiplicity.
func (t *Symmetric) Norm() float64 {
	s := 0.0
	t.ForEach(func(pos int, idx []int) {
		v := t.Data[pos]
		s += Multiplicity(idx) * v * v
	})
	return math.Sqrt(s)
}

// Inner is the Frobenius inner product ⟨t, u⟩ of the full tensors.
func (t *Symmetric) Inner(u *Symmetric) float64 {
	t.mustMatch(u)
	s := 0.0
	t.ForEach(func(pos int, idx []int) {
		s += Multiplicity(idx) * t.Data[pos] * u.Data[pos]
	})
	return s
}

// AddScaled sets t ← t + alpha·u.
func (t *Symmetric) AddScaled(alpha float64, u *Symmetric) {
	t.mustMatch(u)
	for i, v := range u.Data {
		t.Data[i] += alpha * v
	}
}

// Scale sets t ← alpha·t.
func (t *Symmetric) Scale(alpha float64) {
	for i := range t.Data {
		t.Data[i] *= alpha
	}
}

func (t *Symmetric) mustMatch(u *Symmetric) {
	if t.Dim != u.Dim || t.Order != u.Order {
		panic(fmt.Sprintf("tensor: order-%d tensor on R^%d combined with order-%d on R^%d", t.Order, t.Dim, u.Order, u.Dim))
	}
}

// AddOuterPower adds alpha·u^{⊗k} (k = t.Order): entry i_1…i_k gains
// alpha·u_{i_1}⋯u_{i_k}. Population moments are sums of such terms
// ([ATV21, Lemma 3.5]).
func (t *Symmetric) AddOuterPower(alpha float64, u []float64) {
	if len(u) != t.Dim {
		panic(fmt.Sprintf("tensor: vector of length %d for dimension %d", len(u), t.Dim))
	}
	t.ForEach(func(pos int, idx []int) {
		p := alpha
		for _, i := range idx {
			p *= u[i]
		}
		t.Data[pos] += p
	})
}

// Apply returns the full contraction T(u, …, u) = Σ_{i_1…i_k} T_{i_1…i_k}
// u_{i_1}⋯u_{i_k}. For a Hermite moment E[y·He_k(x)] and a unit u it equals
// E[y·He_k(u·x)] (⟨He_k(x), u^{⊗k}⟩ = He_k(u·x)).
func (t *Symmetric) Apply(u []float64) float64 {
	if len(u) != t.Dim {
		panic(fmt.Sprintf("tensor: vector of length %d for dimension %d", len(u), t.Dim))
	}
	s := 0.0
	t.ForEach(func(pos int, idx []int) {
		p := Multiplicity(idx) * t.Data[pos]
		for _, i := range idx {
			p *= u[i]
		}
		s += p
	})
	return s
}

// Contract returns the order-(k−1) tensor T(·, …, ·, v): the last mode (any
// mode, by symmetry) summed against v. It touches only distinct entries:
// cost Len(result)·Dim·k.
func (t *Symmetric) Contract(v []float64) *Symmetric {
	if t.Order < 1 || len(v) != t.Dim {
		panic(fmt.Sprintf("tensor: Contract of an order-%d tensor on R^%d with a vector of length %d", t.Order, t.Dim, len(v)))
	}
	out := NewSymmetric(t.Dim, t.Order-1)
	ix := t.index()
	full := make([]int, t.Order)
	out.ForEach(func(pos int, idx []int) {
		s := 0.0
		for j, vj := range v {
			if vj == 0 {
				continue
			}
			insertSorted(full, idx, j)
			s += vj * t.Data[ix.rank(full)]
		}
		out.Data[pos] = s
	})
	return out
}

// ContractSym returns the order-(k−2) tensor T(·, …, ·, G) = Σ_{a,b} G_ab
// T(…, a, b) for a symmetric matrix G — the contraction of the last mode of
// flatten(T, ℓ, ℓ, 2) with vec(G) in Jennrich's algorithm ([ATV21, Alg 4]).
func (t *Symmetric) ContractSym(G mat.Symmetric) *Symmetric {
	if t.Order < 2 || G.SymmetricDim() != t.Dim {
		panic(fmt.Sprintf("tensor: ContractSym of an order-%d tensor on R^%d with a %d×%d matrix", t.Order, t.Dim, G.SymmetricDim(), G.SymmetricDim()))
	}
	out := NewSymmetric(t.Dim, t.Order-2)
	ix := t.index()
	full := make([]int, t.Order)
	half := make([]int, t.Order-1)
	out.ForEach(func(pos int, idx []int) {
		s := 0.0
		for a := 0; a < t.Dim; a++ {
			insertSorted(half, idx, a)
			for b := a; b < t.Dim; b++ {
				g := G.At(a, b)
				if g == 0 {
					continue
				}
				if b != a {
					g *= 2
				}
				insertSorted(full, half, b)
				s += g * t.Data[ix.rank(full)]
			}
		}
		out.Data[pos] = s
	})
	return out
}

// insertSorted writes the sorted idx with j inserted into dst (len(idx)+1).
func insertSorted(dst, idx []int, j int) {
	at := 0
	for at < len(idx) && idx[at] <= j {
		dst[at] = idx[at]
		at++
	}
	dst[at] = j
	copy(dst[at+1:], idx[at:])
}

// Matricize returns the flattening of T into modes (t1, k−t1) expressed in
// orthonormal bases of the symmetric subspaces: a SymLen(Dim, t1) ×
// SymLen(Dim, k−t1) matrix M with M[α, β] = √(mult(α)·mult(β))·T[α ∪ β].
// The full d^{t1} × d^{k−t1} flattening of [ATV21, App. A.2] equals
// S₁·M·S₂ᵀ with S₁, S₂ having orthonormal columns, so M has the same
// singular values and Frobenius norm; a rank-one term u^{⊗t1}⊗u^{⊗(k−t1)}
// becomes SymEmbed(u, t1)·SymEmbed(u, k−t1)ᵀ. It is what rank estimation and
// Jennrich need, at a fraction of the size (d = 10, t1 = 2: 55 rows, not 100).
func (t *Symmetric) Matricize(t1 int) *mat.Dense {
	t2 := t.Order - t1
	if t1 < 0 || t2 < 0 {
		panic(fmt.Sprintf("tensor: Matricize(%d) of an order-%d tensor", t1, t.Order))
	}
	rows, cols := SymLen(t.Dim, t1), SymLen(t.Dim, t2)
	M := mat.NewDense(rows, cols, nil)
	ix := t.index()
	full := make([]int, t.Order)
	colIdx := make([][]int, 0, cols)
	colMult := make([]float64, 0, cols)
	forEachSorted(t.Dim, t2, func(_ int, idx []int) {
		colIdx = append(colIdx, slices.Clone(idx))
		colMult = append(colMult, math.Sqrt(Multiplicity(idx)))
	})
	forEachSorted(t.Dim, t1, func(r int, a []int) {
		ma := math.Sqrt(Multiplicity(a))
		row := M.RawRowView(r)
		for c, b := range colIdx {
			mergeSorted(full, a, b)
			row[c] = ma * colMult[c] * t.Data[ix.rank(full)]
		}
	})
	return M
}

// mergeSorted merges two sorted slices into dst.
func mergeSorted(dst, a, b []int) {
	i, j := 0, 0
	for k := range dst {
		if j >= len(b) || (i < len(a) && a[i] <= b[j]) {
			dst[k] = a[i]
			i++
		} else {
			dst[k] = b[j]
			j++
		}
	}
}

// SymEmbed returns the coordinates of u^{⊗t} in the orthonormal basis of the
// symmetric subspace that Matricize uses: entry α is √mult(α)·Π_{i∈α} u_i.
// Its norm is ‖u‖^t, and SymEmbed(u,t)·SymEmbed(v,t) = (u·v)^t.
func SymEmbed(u []float64, t int) []float64 {
	out := make([]float64, SymLen(len(u), t))
	forEachSorted(len(u), t, func(pos int, idx []int) {
		p := math.Sqrt(Multiplicity(idx))
		for _, i := range idx {
			p *= u[i]
		}
		out[pos] = p
	})
	return out
}

// SymUnembed2 maps a vector in the order-2 symmetric basis of Matricize back
// to the symmetric d×d matrix it represents (the inverse of SymEmbed(·, 2)
// on symmetric matrices: M_ii = v_(i,i), M_ij = v_(i,j)/√2).
func SymUnembed2(v []float64, d int) *mat.SymDense {
	if len(v) != SymLen(d, 2) {
		panic(fmt.Sprintf("tensor: SymUnembed2 of a vector of length %d for d = %d", len(v), d))
	}
	M := mat.NewSymDense(d, nil)
	forEachSorted(d, 2, func(pos int, idx []int) {
		x := v[pos]
		if idx[0] != idx[1] {
			x /= math.Sqrt2
		}
		M.SetSym(idx[0], idx[1], x)
	})
	return M
}

// Flatten returns the full d^{t1} × d^{k−t1} flattening of [ATV21, App.
// A.2] with row-major multi-index packing. It forms d^k numbers, so it is
// meant for small tensors and tests; it fails above 2²⁶ entries.
func (t *Symmetric) Flatten(t1 int) (*mat.Dense, error) {
	t2 := t.Order - t1
	if t1 < 0 || t2 < 0 {
		return nil, fmt.Errorf("tensor: Flatten(%d) of an order-%d tensor", t1, t.Order)
	}
	rows, cols := ipow(t.Dim, t1), ipow(t.Dim, t2)
	if float64(rows)*float64(cols) > 1<<26 {
		return nil, fmt.Errorf("tensor: the %d×%d flattening is too large to form; use Matricize", rows, cols)
	}
	M := mat.NewDense(rows, cols, nil)
	ix := t.index()
	full := make([]int, t.Order)
	sorted := make([]int, t.Order)
	for r := 0; r < rows; r++ {
		unpack(full[:t1], r, t.Dim)
		for c := 0; c < cols; c++ {
			unpack(full[t1:], c, t.Dim)
			copy(sorted, full)
			slices.Sort(sorted)
			M.Set(r, c, t.Data[ix.rank(sorted)])
		}
	}
	return M, nil
}

func ipow(b, e int) int {
	p := 1
	for ; e > 0; e-- {
		p *= b
	}
	return p
}

// unpack writes the base-d digits of r (most significant first) into dst.
func unpack(dst []int, r, d int) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = r % d
		r /= d
	}
}

// HermiteTensor returns the order-k multivariate Hermite tensor He_k(x) of
// [ATV21, Definition A.2] in product form: entry α is Π_j He_{n_j}(x_j), n_j the
// number of times j occurs in α. Its expectation against y gives the
// Hermite moment E[y·He_k(x)].
func HermiteTensor(x []float64, k int) *Symmetric {
	d := len(x)
	h := make([][]float64, d) // h[j][n] = He_n(x_j)
	for j, v := range x {
		h[j] = hermiteTable(v, k, nil)
	}
	t := NewSymmetric(d, k)
	t.ForEach(func(pos int, idx []int) {
		p := 1.0
		run := 0
		for i := range idx {
			if i > 0 && idx[i] == idx[i-1] {
				run++
			} else {
				run = 1
			}
			if i == len(idx)-1 || idx[i+1] != idx[i] {
				p *= h[idx[i]][run]
			}
		}
		t.Data[pos] = p
	})
	return t
}

// hermiteTable fills dst[0..k] with He_0(x)…He_k(x).
func hermiteTable(x float64, k int, dst []float64) []float64 {
	if cap(dst) < k+1 {
		dst = make([]float64, k+1)
	}
	dst = dst[:k+1]
	dst[0] = 1
	if k >= 1 {
		dst[1] = x
	}
	for n := 1; n < k; n++ {
		dst[n+1] = x*dst[n] - float64(n)*dst[n-1]
	}
	return dst
}

// KhatriRaoGram returns (W·Wᵀ)^{∘ℓ}, the Gram matrix of the Khatri–Rao power
// whose i-th column is w_i^{⊗ℓ} for the rows w_i of W (m×d): ⟨w_i^{⊗ℓ},
// w_j^{⊗ℓ}⟩ = (w_i·w_j)^ℓ, so s_m(W^{⊙ℓ})² = λ_min of it, computed without
// forming any d^ℓ object.
func KhatriRaoGram(W mat.Matrix, ell int) *mat.SymDense {
	m, _ := W.Dims()
	var g mat.Dense
	g.Mul(W, W.T())
	G := mat.NewSymDense(m, nil)
	for i := 0; i < m; i++ {
		for j := i; j < m; j++ {
			G.SetSym(i, j, math.Pow(g.At(i, j), float64(ell)))
		}
	}
	return G
}
