package nn

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/vec"
)

// Depth2 is the depth-2 ReLU network with biases of [ATV21], in the
// multi-output form of a trained MLP's
// logits:
//
//	y = A·ReLU(W·x + B) + C + L·x,  i.e.  Y = ReLU(X·Wᵀ + 1·Bᵀ)·Aᵀ + 1·Cᵀ + X·Lᵀ
//
// with W m×d (hidden rows w_i, PyTorch's out×in layout), B the m hidden
// biases, A p×m the output weights (the paper's a is the single row of A
// when p = 1), C the p output biases and L an optional p×d affine term (nil:
// none; the improper learner of Alg 5 and the refinement use it). The paper's
// column convention f(x) = aᵀσ(Wᵀx + b) has W d×m; here W is its transpose.
type Depth2 struct {
	W *mat.Dense
	B []float64
	A *mat.Dense
	// C is nil or has length p; nil means zero.
	C []float64
	// L is nil or p×d; nil means no affine term.
	L *mat.Dense
}

// Hidden is the number of hidden units m.
func (n *Depth2) Hidden() int { r, _ := n.W.Dims(); return r }

// In is the input dimension d.
func (n *Depth2) In() int { _, c := n.W.Dims(); return c }

// Out is the number of outputs p.
func (n *Depth2) Out() int { r, _ := n.A.Dims(); return r }

// Validate checks shapes and finiteness.
func (n *Depth2) Validate() error {
	if n == nil || n.W == nil || n.A == nil {
		return fmt.Errorf("%w: network has no W or A", ErrInput)
	}
	m, d := n.W.Dims()
	p, ma := n.A.Dims()
	if ma != m || len(n.B) != m {
		return fmt.Errorf("%w: W is %d×%d, A is %d×%d and B has %d entries; A needs m = %d columns and B m entries", ErrInput, m, d, p, ma, len(n.B), m)
	}
	if n.C != nil && len(n.C) != p {
		return fmt.Errorf("%w: C has %d entries for %d outputs", ErrInput, len(n.C), p)
	}
	if n.L != nil {
		if r, c := n.L.Dims(); r != p || c != d {
			return fmt.Errorf("%w: L is %d×%d, want %d×%d", ErrInput, r, c, p, d)
		}
	}
	for _, M := range []*mat.Dense{n.W, n.A, n.L} {
		if M != nil && !finiteRows(M) {
			return fmt.Errorf("%w: network has a NaN or Inf weight", ErrInput)
		}
	}
	if !kern.Finite(n.B) || !kern.Finite(n.C) {
		return fmt.Errorf("%w: network has a NaN or Inf bias", ErrInput)
	}
	return nil
}

// Clone returns a deep copy.
func (n *Depth2) Clone() *Depth2 {
	c := &Depth2{W: mat.DenseCopyOf(n.W), B: append([]float64(nil), n.B...), A: mat.DenseCopyOf(n.A)}
	if n.C != nil {
		c.C = append([]float64(nil), n.C...)
	}
	if n.L != nil {
		c.L = mat.DenseCopyOf(n.L)
	}
	return c
}

// Forward evaluates the network on the rows of X (n×d) and returns n×p.
func (n *Depth2) Forward(X *mat.Dense) *mat.Dense {
	rows, _ := X.Dims()
	H := mat.NewDense(rows, n.Hidden(), nil)
	H.Mul(X, n.W.T())
	hd := H.RawMatrix()
	for r := 0; r < rows; r++ {
		row := hd.Data[r*hd.Stride : r*hd.Stride+hd.Cols]
		for j, b := range n.B {
			row[j] = math.Max(row[j]+b, 0)
		}
	}
	Y := mat.NewDense(rows, n.Out(), nil)
	Y.Mul(H, n.A.T())
	if n.L != nil {
		var lin mat.Dense
		lin.Mul(X, n.L.T())
		Y.Add(Y, &lin)
	}
	if n.C != nil {
		for r := 0; r < rows; r++ {
			row := Y.RawRowView(r)
			for t, c := range n.C {
				row[t] += c
			}
		}
	}
	return Y
}

// Normalize returns the network in the paper's normalisation ([ATV21],
// ‖w_i‖ = 1): every hidden row scaled to ‖w_i‖ = 1 (the scale moved into b_i and
// A's column i, which leaves the function unchanged because ReLU is
// positively homogeneous), units sorted by decreasing ‖A_{:,i}‖, ties by
// the row w_i then b_i lexicographically. A zero row is left as it is (a
// constant unit ReLU(b_i)). Unlike MLP.Canonical, the bias is not part of
// the norm: with ‖w_i‖ = 1, b_i is the unit's offset in standard deviations
// of w_i·x, the quantity the paper's guarantees are stated in.
func (n *Depth2) Normalize() *Depth2 {
	c := n.Clone()
	m := c.Hidden()
	p := c.Out()
	for i := 0; i < m; i++ {
		row := c.W.RawRowView(i)
		s := math.Sqrt(vec.Dot(row, row))
		if s == 0 || math.IsInf(s, 0) {
			continue
		}
		for j := range row {
			row[j] /= s
		}
		c.B[i] /= s
		for t := 0; t < p; t++ {
			c.A.Set(t, i, c.A.At(t, i)*s)
		}
	}
	perm := make([]int, m)
	norms := make([]float64, m)
	for i := range perm {
		perm[i] = i
		norms[i] = mat.Norm(c.A.ColView(i), 2)
	}
	sort.SliceStable(perm, func(a, b int) bool {
		ia, ib := perm[a], perm[b]
		if norms[ia] != norms[ib] {
			return norms[ia] > norms[ib]
		}
		ra, rb := c.W.RawRowView(ia), c.W.RawRowView(ib)
		for j := range ra {
			if ra[j] != rb[j] {
				return ra[j] < rb[j]
			}
		}
		return c.B[ia] < c.B[ib]
	})
	return c.permute(perm)
}

// permute returns the network with unit j of the result being unit perm[j].
func (n *Depth2) permute(perm []int) *Depth2 {
	out := n.Clone()
	for j, i := range perm {
		out.W.SetRow(j, n.W.RawRowView(i))
		out.B[j] = n.B[i]
		out.A.SetCol(j, mat.Col(nil, i, n.A))
	}
	return out
}

// FlipUnit returns the network with unit i replaced by its sign flip
// (w_i, b_i) → (−w_i, −b_i) and the affine term adjusted so the function is
// unchanged: ReLU(z) = ReLU(−z) + z, so A_{:,i}·ReLU(z_i) = A_{:,i}·ReLU(−z_i)
// + A_{:,i}·(w_i·x + b_i) ([ATV21, Claim 4.7]). The Hermite moments of order ≥ 2
// are unchanged by the flip alone; the affine term carries the difference.
func (n *Depth2) FlipUnit(i int) *Depth2 {
	c := n.Clone()
	p, d := c.Out(), c.In()
	if c.L == nil {
		c.L = mat.NewDense(p, d, nil)
	}
	if c.C == nil {
		c.C = make([]float64, p)
	}
	w := c.W.RawRowView(i)
	for t := 0; t < p; t++ {
		a := c.A.At(t, i)
		for j := 0; j < d; j++ {
			c.L.Set(t, j, c.L.At(t, j)+a*w[j])
		}
		c.C[t] += a * c.B[i]
	}
	for j := range w {
		w[j] = -w[j]
	}
	c.B[i] = -c.B[i]
	return c
}

// MLP returns the network as MLP Linear(d→m', bias) → ReLU →
// Linear(m'→p, bias), the layout of torch.nn.Sequential(Linear, ReLU,
// Linear) with keys 0.weight, 0.bias, 2.weight, 2.bias. An affine term L
// is encoded exactly by hidden pairs (Claim D.14's identity ReLU(z) −
// ReLU(−z) = z): with L = Σ_r s_r·u_r·v_rᵀ (thin SVD, rank r ≤ min(p, d)),
// each r adds units ±v_r with bias 0 and output columns ±s_r·u_r, so m' = m +
// 2·rank(L) (m + 2 for one output). C becomes the output bias; dead units
// (w_i = 0, the constant ReLU(b_i)) are folded into it.
func (n *Depth2) MLP() *MLP {
	m, d := n.W.Dims()
	p := n.Out()
	var pairsW, pairsA [][]float64
	if n.L != nil && mat.Norm(n.L, 2) > 0 {
		var svd mat.SVD
		if svd.Factorize(n.L, mat.SVDThin) {
			var U, V mat.Dense
			svd.UTo(&U)
			svd.VTo(&V)
			s := svd.Values(nil)
			for r, sr := range s {
				if sr <= 1e-15*s[0] {
					break
				}
				v := mat.Col(nil, r, &V)
				u := mat.Col(nil, r, &U)
				neg := make([]float64, d)
				for j := range v {
					neg[j] = -v[j]
				}
				au := make([]float64, p)
				an := make([]float64, p)
				for t := range u {
					au[t] = sr * u[t]
					an[t] = -sr * u[t]
				}
				pairsW = append(pairsW, v, neg)
				pairsA = append(pairsA, au, an)
			}
		}
	}
	// Dead units (w = 0) are the constant ReLU(b): folded into the output
	// bias, unless nothing else is left (a network needs one unit).
	C := make([]float64, p)
	copy(C, n.C)
	var live []int
	for i := 0; i < m; i++ {
		if row := n.W.RawRowView(i); vec.Dot(row, row) > 0 {
			live = append(live, i)
			continue
		}
		for t := 0; t < p; t++ {
			C[t] += n.A.At(t, i) * math.Max(n.B[i], 0)
		}
	}
	if len(live) == 0 && len(pairsW) == 0 {
		return &MLP{Layers: []Layer{
			{Weight: mat.NewDense(1, d, nil), Bias: []float64{0}, Act: ReLU},
			{Weight: mat.NewDense(p, 1, nil), Bias: C, Act: Identity},
		}}
	}
	mm := len(live) + len(pairsW)
	W := mat.NewDense(mm, d, nil)
	A := mat.NewDense(p, mm, nil)
	B := make([]float64, mm)
	for k, i := range live {
		W.SetRow(k, n.W.RawRowView(i))
		A.SetCol(k, mat.Col(nil, i, n.A))
		B[k] = n.B[i]
	}
	for r := range pairsW {
		W.SetRow(len(live)+r, pairsW[r])
		A.SetCol(len(live)+r, pairsA[r])
	}
	return &MLP{Layers: []Layer{
		{Weight: W, Bias: B, Act: ReLU},
		{Weight: A, Bias: C, Act: Identity},
	}}
}

// Depth2FromMLP converts a two-layer MLP (Linear → ReLU → Linear, biases
// optional) into a Depth2 without affine term. The matrices are copied.
func Depth2FromMLP(m *MLP) (*Depth2, error) {
	if m == nil || len(m.Layers) != 2 {
		l := 0
		if m != nil {
			l = len(m.Layers)
		}
		return nil, fmt.Errorf("%w: the model has %d layers; a depth-2 network is Linear → ReLU → Linear", ErrInput, l)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	l0, l1 := m.Layers[0], m.Layers[1]
	if l0.Act != ReLU || l1.Act != Identity {
		return nil, fmt.Errorf("%w: activations %s, %s; a depth-2 network is Linear → ReLU → Linear", ErrInput, l0.Act, l1.Act)
	}
	k := l0.Out()
	net := &Depth2{W: mat.DenseCopyOf(l0.Weight), B: make([]float64, k), A: mat.DenseCopyOf(l1.Weight)}
	copy(net.B, l0.Bias)
	if l1.Bias != nil {
		net.C = append([]float64(nil), l1.Bias...)
	}
	return net, nil
}

// finiteRows reports whether every entry of M is finite.
func finiteRows(M *mat.Dense) bool {
	r, _ := M.Dims()
	for i := 0; i < r; i++ {
		if !kern.Finite(M.RawRowView(i)) {
			return false
		}
	}
	return true
}
