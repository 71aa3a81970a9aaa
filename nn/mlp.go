package nn

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
)

// Layer is one affine map followed by an activation: act(x·Wᵀ + b).
// Weight uses PyTorch's nn.Linear layout (out × in); Bias is nil when the
// layer has none (nn.Linear(..., bias=False)).
type Layer struct {
	Weight *mat.Dense
	Bias   []float64
	Act    Activation
}

// In is the layer's input width.
func (l Layer) In() int { _, c := l.Weight.Dims(); return c }

// Out is the layer's output width.
func (l Layer) Out() int { r, _ := l.Weight.Dims(); return r }

// MLP is a feed-forward network of Layers applied in order. Samples are rows:
// Forward maps an n×In matrix to an n×Out matrix.
type MLP struct {
	Layers []Layer
}

// NewTwoLayer returns the bias-free network x ↦ U·ReLU(V·x), i.e.
// Y = ReLU(X·Vᵀ)·Uᵀ, with V k×d and U m×k. The matrices are not copied.
// It does not validate them: V and U that come from a caller rather than
// from a learner go through CheckTwoLayer first (or the result through
// MLP.Validate), since a nil or mismatched matrix makes the network panic
// when it is used.
func NewTwoLayer(V, U *mat.Dense) *MLP {
	return &MLP{Layers: []Layer{
		{Weight: V, Act: ReLU},
		{Weight: U, Act: Identity},
	}}
}

// CheckTwoLayer returns an error wrapping ErrInput unless V and U make a
// two-layer network x ↦ U·φ(V·x) (NewTwoLayer, NewTwoLayerAct): V present
// and k×d, U present and m×k with the same k, all entries finite. The
// message names the matrix and the shape expected.
func CheckTwoLayer(V, U *mat.Dense) error {
	const fn = "nn.CheckTwoLayer"
	k, _, err := certify.CheckMatrix(fn, "V", V, -1, -1, "k×d (one row per hidden unit)")
	if err != nil {
		return err
	}
	_, _, err = certify.CheckMatrix(fn, "U", U, -1, k, fmt.Sprintf("m×k with k = %d (V's rows)", k))
	return err
}

// Clone returns a deep copy of the network.
func (m *MLP) Clone() *MLP {
	c := &MLP{Layers: make([]Layer, len(m.Layers))}
	for i, l := range m.Layers {
		c.Layers[i] = Layer{Weight: mat.DenseCopyOf(l.Weight), Act: l.Act}
		if l.Bias != nil {
			c.Layers[i].Bias = append([]float64(nil), l.Bias...)
		}
	}
	return c
}

// In is the network's input width.
func (m *MLP) In() int { return m.Layers[0].In() }

// Out is the network's output width.
func (m *MLP) Out() int { return m.Layers[len(m.Layers)-1].Out() }

// NumParams counts weights and biases.
func (m *MLP) NumParams() int {
	p := 0
	for _, l := range m.Layers {
		r, c := l.Weight.Dims()
		p += r*c + len(l.Bias)
	}
	return p
}

// Validate checks that the layers chain (each input width equals the previous
// output width), biases have the right length, activations are known, and no
// parameter is NaN or Inf.
func (m *MLP) Validate() error {
	if m == nil || len(m.Layers) == 0 {
		return fmt.Errorf("nn: network has no layers")
	}
	for i, l := range m.Layers {
		if l.Weight == nil {
			return fmt.Errorf("nn: layer %d has no weight", i)
		}
		if i > 0 && l.In() != m.Layers[i-1].Out() {
			return fmt.Errorf("nn: layer %d takes %d inputs but layer %d gives %d outputs", i, l.In(), i-1, m.Layers[i-1].Out())
		}
		if l.Bias != nil && len(l.Bias) != l.Out() {
			return fmt.Errorf("nn: layer %d has %d outputs but a bias of length %d", i, l.Out(), len(l.Bias))
		}
		if !l.Act.Valid() {
			return fmt.Errorf("nn: layer %d has unknown activation %q", i, l.Act)
		}
		r, c := l.Weight.Dims()
		for a := 0; a < r; a++ {
			for b := 0; b < c; b++ {
				if v := l.Weight.At(a, b); math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("nn: layer %d weight[%d,%d] is %v", i, a, b, v)
				}
			}
		}
		for j, v := range l.Bias {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("nn: layer %d bias[%d] is %v", i, j, v)
			}
		}
	}
	return nil
}

// denseData returns the entries of m row-major (PyTorch's layout of a
// weight tensor), copied.
func denseData(m *mat.Dense) []float64 {
	r, c := m.Dims()
	out := make([]float64, 0, r*c)
	for a := 0; a < r; a++ {
		out = append(out, m.RawRowView(a)...)
	}
	return out
}
