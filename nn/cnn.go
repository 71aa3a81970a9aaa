package nn

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
)

// Sequential convolutional networks: the module types of an nn.Sequential
// of Conv2d, ReLU, MaxPool2d, Flatten and Linear, in PyTorch's NCHW layout.
// A sample is one row of C·H·W values (channel-major, then rows, then
// columns: torch's x.reshape(n, -1)), so a CNN maps an n×In matrix to an
// n×Out matrix like an MLP and the rest of relurec (data readers, Evaluate,
// the CLI's eval) needs no image type.
//
// A convolution is stored as its Out × (In·KH·KW) matrix, the one the
// data-driven low-rank compression factors: the layer's output at one
// position is that matrix times the unfolded (im2col) patch under the kernel,
// so a conv layer is an MLP layer applied to the rows of Unfold. A factored
// conv is two consecutive Conv2d modules with nothing between them: a KH×KW
// conv to r channels, then a 1×1 conv to Out channels — as a factored Linear
// is two consecutive Linear modules.

// FeatureShape is the shape of one sample between two modules of a CNN: C
// channels of H×W maps, stored channel-major as PyTorch stores one image of
// an NCHW batch. After a Flatten, Flat is set and the sample is a vector of
// Size() values (C = Size(), H = W = 1).
type FeatureShape struct {
	C, H, W int
	Flat    bool
}

// Size is the number of values in one sample, C·H·W.
func (s FeatureShape) Size() int { return s.C * s.H * s.W }

// String is "16×28×28", or "1568" for a flat vector.
func (s FeatureShape) String() string {
	if s.Flat {
		return fmt.Sprint(s.Size())
	}
	return fmt.Sprintf("%d×%d×%d", s.C, s.H, s.W)
}

// CNNLayer is one module of a CNN: *Conv2d, *ReLULayer, *MaxPool2d,
// *Flatten or *Linear. The set is closed (the interface has unexported
// methods) because Forward, the model files and the compression code must
// know every kind; a caller tells them apart with a type switch.
type CNNLayer interface {
	// OutShape returns the shape of the module's output for an input of
	// shape in, or an error (wrapping ErrInput) saying why the module
	// cannot take it.
	OutShape(in FeatureShape) (FeatureShape, error)
	// Params is the number of weights and biases.
	Params() int
	// apply computes the module on the b samples (rows) of x, whose shape
	// is in, and returns b rows of the output shape.
	apply(x *mat.Dense, in, out FeatureShape) *mat.Dense
}

// Conv2d is torch.nn.Conv2d with groups = 1 and dilation = 1 and zero
// padding: out[o, y, x] = bias[o] + Σ_{c,i,j} weight[o, c, i, j] ·
// in[c, y·sh − ph + i, x·sw − pw + j], reading zero outside the image.
type Conv2d struct {
	// Weight is PyTorch's weight tensor (Out × In × KH × KW) as an
	// Out × (In·KH·KW) matrix: row o is weight[o] flattened row-major, so
	// the layer computes Unfold(x)·Weightᵀ + bias, one row per output
	// position.
	Weight *mat.Dense
	// Bias has one entry per output channel, or is nil (bias=False).
	Bias []float64
	// Kernel is (KH, KW).
	Kernel [2]int
	// Stride is (rows, columns); a zero entry means 1, PyTorch's default,
	// so the 1×1 conv of a factored layer needs no settings.
	Stride [2]int
	// Padding is the number of zero rows (columns) added above and below
	// (left and right) of every map; PyTorch's padding=(ph, pw).
	Padding [2]int
}

// InChannels is the number of input channels, In = columns / (KH·KW).
func (c *Conv2d) InChannels() int {
	if c.Weight == nil || c.Kernel[0] <= 0 || c.Kernel[1] <= 0 {
		return 0
	}
	_, k := c.Weight.Dims()
	return k / (c.Kernel[0] * c.Kernel[1])
}

// OutChannels is the number of output channels (rows of Weight).
func (c *Conv2d) OutChannels() int {
	if c.Weight == nil {
		return 0
	}
	r, _ := c.Weight.Dims()
	return r
}

// Strides returns the stride with zero entries replaced by 1, the stride
// the forward pass and the model files use.
func (c *Conv2d) Strides() [2]int { return defaultPair(c.Stride, [2]int{1, 1}) }

// defaultPair replaces the zero entries of p by those of def.
func defaultPair(p, def [2]int) [2]int {
	for i := range p {
		if p[i] == 0 {
			p[i] = def[i]
		}
	}
	return p
}

// OutShape checks the kernel against Weight and in, and returns the output
// shape: Out × ⌊(H + 2ph − KH)/sh⌋ + 1 × ⌊(W + 2pw − KW)/sw⌋ + 1, as PyTorch.
func (c *Conv2d) OutShape(in FeatureShape) (FeatureShape, error) {
	if c.Weight == nil {
		return FeatureShape{}, shapeErrf("has no weight")
	}
	r, k := c.Weight.Dims()
	kh, kw := c.Kernel[0], c.Kernel[1]
	if kh <= 0 || kw <= 0 {
		return FeatureShape{}, shapeErrf("kernel %d×%d; both sides must be at least 1", kh, kw)
	}
	if k%(kh*kw) != 0 {
		return FeatureShape{}, shapeErrf("weight has %d columns, not a multiple of the kernel's %d×%d = %d positions (expected In·KH·KW)", k, kh, kw, kh*kw)
	}
	if c.Bias != nil && len(c.Bias) != r {
		return FeatureShape{}, shapeErrf("has %d output channels but a bias of length %d", r, len(c.Bias))
	}
	s := c.Strides()
	if s[0] < 0 || s[1] < 0 || c.Padding[0] < 0 || c.Padding[1] < 0 {
		return FeatureShape{}, shapeErrf("stride %v and padding %v must not be negative", c.Stride, c.Padding)
	}
	if in.Flat {
		return FeatureShape{}, shapeErrf("after Flatten: a convolution needs C×H×W maps, got a vector of %d", in.Size())
	}
	if in.C != k/(kh*kw) {
		return FeatureShape{}, shapeErrf("takes %d input channels (weight %d×%d×%d×%d) but its input has %d (shape %v)", k/(kh*kw), r, k/(kh*kw), kh, kw, in.C, in)
	}
	oh, ow, err := windowOut(in, c.Kernel, s, c.Padding)
	if err != nil {
		return FeatureShape{}, err
	}
	return FeatureShape{C: r, H: oh, W: ow}, nil
}

// shapeErrf formats an error of a module's OutShape, wrapping ErrInput.
func shapeErrf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errs.ErrInput)...)
}

// windowOut is the output height and width of a kernel sliding over in
// with the given stride and padding (both sides), or an error if the kernel
// does not fit.
func windowOut(in FeatureShape, kernel, stride, pad [2]int) (int, int, error) {
	h, w := in.H+2*pad[0], in.W+2*pad[1]
	if kernel[0] > h || kernel[1] > w {
		return 0, 0, shapeErrf("kernel %d×%d is larger than the padded %d×%d input (shape %v, padding %v)", kernel[0], kernel[1], h, w, in, pad)
	}
	return (h-kernel[0])/stride[0] + 1, (w-kernel[1])/stride[1] + 1, nil
}

// Params is Out·In·KH·KW weights plus the biases.
func (c *Conv2d) Params() int {
	r, k := c.Weight.Dims()
	return r*k + len(c.Bias)
}

// ReLULayer is torch.nn.ReLU: max(x, 0) elementwise, any shape. (ReLU
// itself names the activation of an MLP Layer.)
type ReLULayer struct{}

// OutShape is in.
func (*ReLULayer) OutShape(in FeatureShape) (FeatureShape, error) { return in, nil }

// Params is 0.
func (*ReLULayer) Params() int { return 0 }

// MaxPool2d is torch.nn.MaxPool2d with dilation 1 and ceil_mode False: the
// largest value under each Kernel window, per channel; padding counts as
// −∞ (it is never the maximum), as in PyTorch.
type MaxPool2d struct {
	Kernel [2]int
	// Stride is (rows, columns); a zero entry means the kernel's size,
	// PyTorch's default (non-overlapping windows).
	Stride [2]int
	// Padding is added on both sides; PyTorch allows at most half the
	// kernel.
	Padding [2]int
}

// Strides returns the stride with zero entries replaced by the kernel
// size (PyTorch's default), the stride the forward pass and the model
// files use.
func (p *MaxPool2d) Strides() [2]int { return defaultPair(p.Stride, p.Kernel) }

// OutShape checks the window and returns C × ⌊(H + 2ph − KH)/sh⌋ + 1 ×
// ⌊(W + 2pw − KW)/sw⌋ + 1.
func (p *MaxPool2d) OutShape(in FeatureShape) (FeatureShape, error) {
	k, s := p.Kernel, p.Strides()
	if k[0] <= 0 || k[1] <= 0 || s[0] < 0 || s[1] < 0 {
		return FeatureShape{}, shapeErrf("kernel %v and stride %v must be positive", k, s)
	}
	if p.Padding[0] < 0 || p.Padding[1] < 0 || 2*p.Padding[0] > k[0] || 2*p.Padding[1] > k[1] {
		return FeatureShape{}, shapeErrf("padding %v must lie between 0 and half the kernel %v (PyTorch's rule: a window never lies wholly in the padding)", p.Padding, k)
	}
	if in.Flat {
		return FeatureShape{}, shapeErrf("after Flatten: pooling needs C×H×W maps, got a vector of %d", in.Size())
	}
	oh, ow, err := windowOut(in, k, s, p.Padding)
	if err != nil {
		return FeatureShape{}, err
	}
	return FeatureShape{C: in.C, H: oh, W: ow}, nil
}

// Params is 0.
func (*MaxPool2d) Params() int { return 0 }

// Flatten is torch.nn.Flatten(): C×H×W maps become one vector of C·H·W
// values in the same (channel-major) order, which is how a sample is stored
// anyway; it only marks the shape flat so that a Linear may follow.
type Flatten struct{}

// OutShape is in, flat.
func (*Flatten) OutShape(in FeatureShape) (FeatureShape, error) {
	return FeatureShape{C: in.Size(), H: 1, W: 1, Flat: true}, nil
}

// Params is 0.
func (*Flatten) Params() int { return 0 }

// Linear is torch.nn.Linear: x·Weightᵀ + Bias with Weight out × in. It needs
// a flat input (a Flatten before it), because PyTorch's Linear on C×H×W maps
// would act on the last axis only.
type Linear struct {
	Weight *mat.Dense
	Bias   []float64
}

// OutShape checks the input width and returns the flat output.
func (l *Linear) OutShape(in FeatureShape) (FeatureShape, error) {
	if l.Weight == nil {
		return FeatureShape{}, shapeErrf("has no weight")
	}
	r, c := l.Weight.Dims()
	if l.Bias != nil && len(l.Bias) != r {
		return FeatureShape{}, shapeErrf("has %d outputs but a bias of length %d", r, len(l.Bias))
	}
	if !in.Flat {
		return FeatureShape{}, shapeErrf("on %v maps: add a Flatten before it (PyTorch's Linear would act on the last axis only)", in)
	}
	if in.Size() != c {
		return FeatureShape{}, shapeErrf("takes %d inputs (weight %d×%d) but gets %d", c, r, c, in.Size())
	}
	return FeatureShape{C: r, H: 1, W: 1, Flat: true}, nil
}

// Params is out·in weights plus the biases.
func (l *Linear) Params() int {
	r, c := l.Weight.Dims()
	return r*c + len(l.Bias)
}

// CNN is a sequential convolutional network: Layers in the order of the
// equivalent torch.nn.Sequential, Layers[i] being module i (so its
// parameters are "i.weight" and "i.bias" in a state dict). Input is the
// shape of one sample; Forward maps an n × Input.Size() matrix (one
// flattened NCHW image per row) to n × Out.
type CNN struct {
	Input  FeatureShape
	Layers []CNNLayer
}

// Network is what an MLP and a CNN share: a map from n×In rows to n×Out
// rows that can be scored as a classifier and sized. The CLI's eval takes
// either through it.
type Network interface {
	In() int
	Out() int
	Forward(x *mat.Dense) *mat.Dense
	Evaluate(x *mat.Dense, labels []int) (Metrics, error)
	NumParams() int
	MultiplyAdds() int
	Ranks() []int
	Validate() error
}

var (
	_ Network = (*MLP)(nil)
	_ Network = (*CNN)(nil)
	_ Network = (*Graph)(nil)
)

// layerName is "layer 3 (Conv2d)", how errors name a module.
func layerName(i int, l CNNLayer) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", l), "*nn.")
	if name == "ReLULayer" {
		name = "ReLU"
	}
	return fmt.Sprintf("layer %d (%s)", i, name)
}

// Shapes returns the shape of the data entering each layer and, last, the
// output shape (len(Layers)+1 shapes), or the first layer that cannot take
// its input.
func (c *CNN) Shapes() ([]FeatureShape, error) {
	s, _, err := c.shapes()
	return s, err
}

// FailingLayer returns the index of the first layer that cannot take the
// shape the one before gives (the layer Shapes' error names), or −1 when
// the shapes chain or the input shape itself is wrong, so a model file
// reader can name the node or module the layer came from.
func (c *CNN) FailingLayer() int {
	_, i, _ := c.shapes()
	return i
}

// shapes is Shapes that also returns the index of the failing layer (−1 if
// the input itself is wrong).
func (c *CNN) shapes() ([]FeatureShape, int, error) {
	if c == nil || len(c.Layers) == 0 {
		return nil, -1, errs.Inputf("nn: CNN has no layers")
	}
	in := c.Input
	if in.C <= 0 || in.H <= 0 || in.W <= 0 || in.Flat && (in.H != 1 || in.W != 1) {
		return nil, -1, errs.Inputf("nn: CNN input shape %d×%d×%d must be positive (flat inputs: C values, H = W = 1)", in.C, in.H, in.W)
	}
	out := []FeatureShape{in}
	for i, l := range c.Layers {
		if l == nil {
			return nil, i, errs.Inputf("nn: CNN layer %d is nil", i)
		}
		next, err := l.OutShape(in)
		if err != nil {
			return nil, i, fmt.Errorf("nn: CNN %s: %w", layerName(i, l), err)
		}
		out = append(out, next)
		in = next
	}
	return out, -1, nil
}

// Validate checks that every layer takes the shape the one before gives
// (Shapes) and that no parameter is NaN or Inf. Errors wrap ErrInput.
func (c *CNN) Validate() error {
	if _, err := c.Shapes(); err != nil {
		return err
	}
	for i, l := range c.Layers {
		w, b := LayerParams(l)
		if w == nil {
			continue
		}
		r, k := w.Dims()
		for a := 0; a < r; a++ {
			for j, v := range w.RawRowView(a)[:k] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return errs.Inputf("nn: CNN %s weight[%d,%d] is %v", layerName(i, l), a, j, v)
				}
			}
		}
		for j, v := range b {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return errs.Inputf("nn: CNN %s bias[%d] is %v", layerName(i, l), j, v)
			}
		}
	}
	return nil
}

// layerParams returns a Conv2d's or Linear's weight matrix and bias, nil
// for modules without parameters.
func LayerParams(l CNNLayer) (*mat.Dense, []float64) {
	switch l := l.(type) {
	case *Conv2d:
		return l.Weight, l.Bias
	case *Linear:
		return l.Weight, l.Bias
	}
	return nil, nil
}

// In is the number of values of one input sample, Input.Size().
func (c *CNN) In() int { return c.Input.Size() }

// Out is the size of the output; 0 if the network is invalid.
func (c *CNN) Out() int {
	s, err := c.Shapes()
	if err != nil {
		return 0
	}
	return s[len(s)-1].Size()
}

// NumParams counts weights and biases.
func (c *CNN) NumParams() int {
	p := 0
	for _, l := range c.Layers {
		p += l.Params()
	}
	return p
}

// MultiplyAdds is the number of multiply-adds of one forward pass per
// sample: Out·In·KH·KW per output position of each Conv2d, in·out per
// Linear (pooling and ReLU count as none). 0 if the network is invalid.
func (c *CNN) MultiplyAdds() int {
	s, err := c.Shapes()
	if err != nil {
		return 0
	}
	m := 0
	for i, l := range c.Layers {
		if w, _ := LayerParams(l); w != nil {
			r, k := w.Dims()
			m += r * k * s[i+1].H * s[i+1].W
		}
	}
	return m
}

// Ranks returns, for each Conv2d or Linear module that is not the first
// factor of a factored pair, the inner rank r if it is the second factor
// (the module before it is the same kind with nothing between them: a
// KH×KW conv to r channels then a 1×1 conv, or Linear(in, r) then
// Linear(r, out)), else 0 — the CNN form of MLP.Ranks.
func (c *CNN) Ranks() []int {
	var out []int
	for i := 0; i < len(c.Layers); i++ {
		if w, _ := LayerParams(c.Layers[i]); w == nil {
			continue
		}
		if i+1 < len(c.Layers) && sameKind(c.Layers[i], c.Layers[i+1]) {
			r, _ := LayerParams(c.Layers[i])
			rows, _ := r.Dims()
			out = append(out, rows)
			i++
			continue
		}
		out = append(out, 0)
	}
	return out
}

// sameKind reports whether a and b are both Conv2d or both Linear.
func sameKind(a, b CNNLayer) bool {
	_, ac := a.(*Conv2d)
	_, bc := b.(*Conv2d)
	_, al := a.(*Linear)
	_, bl := b.(*Linear)
	return ac && bc || al && bl
}

// Widths lists the input channels (or width, for a flat input) and the
// output channels or width of every Conv2d and Linear: 1-16-32-128-10 for
// the Fashion-MNIST example. It is the CNN's line in eval's table.
func (c *CNN) Widths() []int {
	w := []int{c.Input.C}
	for _, l := range c.Layers {
		if m, _ := LayerParams(l); m != nil {
			r, _ := m.Dims()
			w = append(w, r)
		}
	}
	return w
}

// String describes the network in one line, PyTorch-style:
// "1×28×28 → Conv2d(1, 16, 3×3, stride 1, pad 1) → ReLU → MaxPool2d(2×2) → …".
func (c *CNN) String() string {
	parts := []string{c.Input.String()}
	for _, l := range c.Layers {
		switch l := l.(type) {
		case *Conv2d:
			s := l.Strides()
			parts = append(parts, fmt.Sprintf("Conv2d(%d, %d, %d×%d, stride %d×%d, pad %d×%d)", l.InChannels(), l.OutChannels(), l.Kernel[0], l.Kernel[1], s[0], s[1], l.Padding[0], l.Padding[1]))
		case *ReLULayer:
			parts = append(parts, "ReLU")
		case *MaxPool2d:
			s := l.Strides()
			parts = append(parts, fmt.Sprintf("MaxPool2d(%d×%d, stride %d×%d, pad %d×%d)", l.Kernel[0], l.Kernel[1], s[0], s[1], l.Padding[0], l.Padding[1]))
		case *Flatten:
			parts = append(parts, "Flatten")
		case *Linear:
			r, k := l.Weight.Dims()
			parts = append(parts, fmt.Sprintf("Linear(%d, %d)", k, r))
		default:
			parts = append(parts, fmt.Sprintf("%T", l))
		}
	}
	return strings.Join(parts, " → ")
}

// FactorConv returns the two modules that store a rank-r version of the
// convolution c, W ≈ U·V with V r × (In·KH·KW) and U Out × r, the form a
// low-rank compression of the conv writes: a conv with c's kernel, stride
// and padding from In to r channels (weight v, bias vb, nil for none), then
// a 1×1 conv from r to Out channels (weight u, bias ub). The 1×1 conv acts
// on each position alone, so the pair computes Unfold(x)·(U·V)ᵀ + U·vb + ub
// at every position: the rank-r layer. Put the pair where c was, with
// nothing between them. It panics if the shapes do not chain.
func FactorConv(c *Conv2d, v, u *mat.Dense, vb, ub []float64) [2]*Conv2d {
	r, k := v.Dims()
	out, ru := u.Dims()
	_, kc := c.Weight.Dims()
	if ru != r || k != kc || vb != nil && len(vb) != r || ub != nil && len(ub) != out {
		panic(fmt.Sprintf("nn: FactorConv: V %d×%d, U %d×%d, biases %d and %d do not factor a conv of weight %d×%d", r, k, out, ru, len(vb), len(ub), c.OutChannels(), kc))
	}
	return [2]*Conv2d{
		{Weight: v, Bias: vb, Kernel: c.Kernel, Stride: c.Stride, Padding: c.Padding},
		{Weight: u, Bias: ub, Kernel: [2]int{1, 1}},
	}
}
