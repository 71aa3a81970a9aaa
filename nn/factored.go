package nn

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Factor returns the two layers that store a rank-r layer
// act(x·(U·V)ᵀ + U·c + b), the nn.Sequential(Linear(in, r), Linear(r, out))
// a low-rank compression produces: the first has weight v (r×in), bias c
// (nil for none) and no activation; the second weight u (out×r), bias b and
// act. It panics if the shapes do not chain.
func Factor(v, u *mat.Dense, c, b []float64, act Activation) [2]Layer {
	r, _ := v.Dims()
	out, ru := u.Dims()
	if ru != r {
		panic(fmt.Sprintf("nn: Factor: V has %d rows but U has %d columns", r, ru))
	}
	if c != nil && len(c) != r || b != nil && len(b) != out {
		panic("nn: Factor: bias lengths do not match the factors")
	}
	return [2]Layer{{Weight: v, Bias: c, Act: Identity}, {Weight: u, Bias: b, Act: act}}
}

// HasFactored reports whether some layer other than the last has the
// Identity activation, i.e. the network holds a factored (low-rank) layer or
// two consecutive linear maps.
func (m *MLP) HasFactored() bool {
	for i := 0; i+1 < len(m.Layers); i++ {
		if m.Layers[i].Act == Identity {
			return true
		}
	}
	return false
}

// Merge returns an equivalent network in which every layer with the Identity
// activation that is followed by another layer is multiplied into it: the
// pair (W₁, b₁) then (W₂, b₂) becomes (W₂·W₁, W₂·b₁ + b₂). A factored layer
// becomes the dense layer it represents. Layers are copied; m is unchanged.
func (m *MLP) Merge() *MLP {
	out := &MLP{}
	var pend *Layer // an Identity layer waiting for the next one
	for _, l := range m.Layers {
		cur := Layer{Weight: mat.DenseCopyOf(l.Weight), Act: l.Act}
		if l.Bias != nil {
			cur.Bias = append([]float64(nil), l.Bias...)
		}
		if pend != nil {
			var w mat.Dense
			w.Mul(cur.Weight, pend.Weight)
			var b []float64
			if pend.Bias != nil || cur.Bias != nil {
				b = make([]float64, cur.Out())
				if pend.Bias != nil {
					mat.NewVecDense(len(b), b).MulVec(cur.Weight, mat.NewVecDense(len(pend.Bias), pend.Bias))
				}
				if cur.Bias != nil {
					floats.Add(b, cur.Bias)
				}
			}
			cur = Layer{Weight: &w, Bias: b, Act: l.Act}
			pend = nil
		}
		if cur.Act == Identity {
			c := cur
			pend = &c
			continue
		}
		out.Layers = append(out.Layers, cur)
	}
	if pend != nil {
		out.Layers = append(out.Layers, *pend)
	}
	return out
}

// Ranks returns, for each layer, the inner dimension if the layer is the
// second factor of a factored pair (the first factor's output width), else
// 0. It is how a compressed model's ranks are read back from a file.
func (m *MLP) Ranks() []int {
	var out []int
	for i := 0; i < len(m.Layers); i++ {
		if i+1 < len(m.Layers) && m.Layers[i].Act == Identity {
			out = append(out, m.Layers[i].Out())
			i++
			continue
		}
		out = append(out, 0)
	}
	return out
}

// BalanceUnit rescales one inner unit of a factored pair, a product by u
// (plus the bias *b, if b is not nil) then by v: u and *b times
// s = √(‖v‖/‖u‖), v divided by s, so that both have the norm √(‖u‖·‖v‖)
// and the product is unchanged up to rounding. A dead unit (a zero
// vector) is left as it is. u and v are views of the factors.
func BalanceUnit(u, v *mat.VecDense, b *float64) {
	a, c := mat.Norm(u, 2), mat.Norm(v, 2)
	if !(a > 0 && c > 0) {
		return
	}
	s := math.Sqrt(c / a)
	u.ScaleVec(s, u)
	if b != nil {
		*b *= s
	}
	for i := 0; i < v.Len(); i++ {
		v.SetVec(i, v.AtVec(i)/s)
	}
}

// BalanceFactors rescales every factored pair (a layer with the Identity
// activation followed by another layer) so that, for each inner unit k, row
// k of the first factor and column k of the second have the same norm: row
// k (and its bias) times s_k, column k divided by s_k. The network computes
// the same function up to rounding. A low-rank fit returns factors whose
// whole scale sits in one of them (e.g. orthonormal columns times a factor
// of norm 10³); gradient steps of a fixed size, as Adam's are, then move
// the two very unequally, and training diverges. Balance before Distill.
func (m *MLP) BalanceFactors() {
	for i := 0; i+1 < len(m.Layers); i++ {
		first, second := m.Layers[i], m.Layers[i+1]
		if first.Act != Identity {
			continue
		}
		for k := 0; k < first.Out(); k++ {
			var b *float64
			if first.Bias != nil {
				b = &first.Bias[k]
			}
			BalanceUnit(first.Weight.RowView(k).(*mat.VecDense), second.Weight.ColView(k).(*mat.VecDense), b)
		}
		i++ // the second layer of the pair is not the first of another
	}
}
