package twolayer

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// signRows is ℓ of Alg 6: the number of samples the projection test uses
// (practical default, not in [BJW19]: the gap grows like ℓ and the noise like √ℓ).
const signRows = 50000

// RecoverSigns fixes the unknown signs of approximate rows ±V̂ under noise —
// Bakshi et al. Alg 6. For unit i it compares how well the outputs are
// explained by the span of {f(±X̄v̂_j)}_{j≠i} ∪ {f(X̄v̂_i)} versus the same set
// with f(−X̄v̂_i): the true sign leaves the smaller residual ‖Ȳ(I − P_S)‖_F²
// (Theorem 9). X̄, Ȳ are the first min(n, 50000) samples. Both residuals are
// computed from one Gram matrix of the 2k candidate activations, so each unit
// costs a (2k−1)×(2k−1) Cholesky solve after an ℓ·2k·(2k+m) setup.
//
// It returns V with the signs applied and the per-unit margins
// (a⁻ − a⁺)/(a⁻ + a⁺), positive when the kept sign won clearly.
//
// With the candidate activations φ(±X̄v̂_j)
// of a rectified activation act (Bakshi et al. App. 9.1: the sign gap of
// Cor 6 holds for any rectified φ). For e^x − 1 the rows' norms matter:
// pass rows at their estimated scale (unit rows give an approximate test).
// act "" means nn.ReLU. X must be n×d, Y n×m and Vhat k×d, all finite;
// other shapes (or nil) give an error wrapping ErrInput that says what was
// expected.
func RecoverSigns(ctx context.Context, X, Y, Vhat *mat.Dense, act nn.Activation) (*mat.Dense, []float64, error) {
	n, d, m, k, err := checkXYV("twolayer.RecoverSigns", X, Y, Vhat, "Vhat")
	if err != nil {
		return nil, nil, err
	}
	if act == "" {
		act = nn.ReLU
	}
	if err := checkActivation(act); err != nil {
		return nil, nil, err
	}
	l := min(n, signRows)
	Xb := X.Slice(0, l, 0, d)
	Yb := Y.Slice(0, l, 0, m)
	C := signCandidates(Xb, Vhat, act)
	if err := checkFinite(C, act); err != nil {
		return nil, nil, err
	}
	G := mat.NewSymDense(2*k, nil)
	G.SymOuterK(1, C.T())
	CY := mat.NewDense(2*k, m, nil)
	CY.Mul(C.T(), Yb)
	// The common term ‖Ȳ‖_F² cancels in the comparison a⁻ − a⁺.
	yy := math.Pow(mat.Norm(Yb, 2), 2)
	sg := signGram{G: G, CY: CY, m: m}
	proj := sg.projected
	V := mat.DenseCopyOf(Vhat)
	margins := make([]float64, k)
	for i := 0; i < k; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		var others []int
		for j := 0; j < k; j++ {
			if j != i {
				others = append(others, j, k+j)
			}
		}
		pPlus, err := proj(append(append([]int{}, others...), i))
		if err != nil {
			return nil, nil, fmt.Errorf("twolayer: sign recovery of unit %d: %w", i, err)
		}
		pMinus, err := proj(append(append([]int{}, others...), k+i))
		if err != nil {
			return nil, nil, fmt.Errorf("twolayer: sign recovery of unit %d: %w", i, err)
		}
		aPlus, aMinus := yy-pPlus, yy-pMinus
		margins[i] = (aMinus - aPlus) / math.Max(aMinus+aPlus, math.SmallestNonzeroFloat64)
		if aPlus > aMinus {
			row := V.RawRowView(i)
			for j := range row {
				row[j] = -row[j]
			}
			margins[i] = -margins[i]
		}
	}
	return V, margins, nil
}

// signCandidates returns the candidate activations of RecoverSigns,
// C = [f(X̄v̂_1) … f(X̄v̂_k), f(−X̄v̂_1) … f(−X̄v̂_k)] (l×2k).
func signCandidates(Xb mat.Matrix, Vhat *mat.Dense, act nn.Activation) *mat.Dense {
	f := act.Func()
	l, _ := Xb.Dims()
	k, _ := Vhat.Dims()
	P := mat.NewDense(l, k, nil)
	P.Mul(Xb, Vhat.T())
	C := mat.NewDense(l, 2*k, nil)
	for q := 0; q < l; q++ {
		row := P.RawRowView(q)
		out := C.RawRowView(q)
		if act == nn.ReLU {
			for j, v := range row {
				out[j] = math.Max(v, 0)
				out[k+j] = math.Max(-v, 0)
			}
		} else {
			for j, v := range row {
				out[j] = f(v)
				out[k+j] = f(-v)
			}
		}
	}
	return C
}

// signGram holds the Gram matrix G = CᵀC of the candidate activations and
// CY = CᵀȲ (Ȳ with m columns), from which every projection RecoverSigns
// compares is computed.
type signGram struct {
	G  *mat.SymDense
	CY *mat.Dense
	m  int
}

// projected returns ‖P_S Ȳ‖_F² for the span S of the candidate columns
// cols, by a Cholesky solve of their Gram matrix.
func (sg signGram) projected(cols []int) (float64, error) {
	G, CY, m := sg.G, sg.CY, sg.m
	g := mat.NewSymDense(len(cols), nil)
	b := mat.NewDense(len(cols), m, nil)
	for a, ca := range cols {
		for c, cc := range cols[a:] {
			g.SetSym(a, a+c, G.At(ca, cc))
		}
		b.SetRow(a, CY.RawRowView(ca))
	}
	var chol mat.Cholesky
	if !chol.Factorize(g) {
		return 0, fmt.Errorf("candidate activations are linearly dependent (too few samples, or two units are parallel)")
	}
	var x mat.Dense
	if err := chol.SolveTo(&x, b); err != nil {
		return 0, err
	}
	// ‖P_S Ȳ‖_F² = tr(bᵀ g⁻¹ b).
	s := 0.0
	for a := 0; a < len(cols); a++ {
		for j := 0; j < m; j++ {
			s += b.At(a, j) * x.At(a, j)
		}
	}
	return s, nil
}

// activations returns ReLU(X·Vᵀ) (n×k).
func activations(X, V *mat.Dense) *mat.Dense { return activationsIn(nil, X, V) }

// activationsIn is activations computed into buf when it has room for the
// n×k entries (see newDenseIn).
func activationsIn(buf []float64, X, V *mat.Dense) *mat.Dense {
	n, _ := X.Dims()
	k, _ := V.Dims()
	F := newDenseIn(buf, n, k)
	mulRowsPar(F, X, mat.DenseCopyOf(V.T()))
	data := F.RawMatrix().Data
	for i, v := range data {
		if v < 0 {
			data[i] = 0
		}
	}
	return F
}
