package nn

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
)

// cnnChunk is the number of samples pushed through a CNN at once by one
// goroutine. Like forwardChunk it is a constant so that results do not
// depend on GOMAXPROCS. It is smaller than an MLP's because a conv layer's
// unfolded input has Ho·Wo rows per sample: 32 Fashion-MNIST images make a
// 6272 × 144 matrix (7 MB) at the example's second conv, large enough for an
// efficient matrix multiply and small enough to stay near the cache.
const cnnChunk = 32

// Unfold returns the im2col matrix of the samples x (n × in.Size(), one
// flattened C×H×W map per row) for a kernel sliding with the given stride
// (zero entries mean 1) and zero padding: one row per (sample, output row,
// output column), in that order, and one column per (channel, kernel row,
// kernel column), in that order. So a Conv2d's output before its bias is
// Unfold(x)·Weightᵀ, row s·Ho·Wo + y·Wo + x holding the output channels at
// position (y, x) of sample s: the conv is an MLP layer on the patches, and
// a data-driven low-rank factorization of Weight uses these rows as its
// data. It is torch.nn.functional.unfold(x, kernel, padding=padding,
// stride=stride) with the patches as rows (transpose(1, 2), then reshape to
// n·L rows). The matrix has n·Ho·Wo rows of In·KH·KW: unfold a sample of
// the images (60 000 Fashion-MNIST images would make 47 million rows at
// 28×28). Errors (a flat or mismatched input, a kernel that does not fit)
// wrap ErrInput.
func Unfold(x *mat.Dense, in FeatureShape, kernel, stride, padding [2]int) (*mat.Dense, error) {
	stride = defaultPair(stride, [2]int{1, 1})
	if x == nil || x.IsEmpty() {
		return nil, errs.Inputf("nn: Unfold: no samples")
	}
	if in.Flat || in.C <= 0 || in.H <= 0 || in.W <= 0 {
		return nil, errs.Inputf("nn: Unfold: input shape %v is not C×H×W maps", in)
	}
	if kernel[0] <= 0 || kernel[1] <= 0 || stride[0] < 0 || stride[1] < 0 || padding[0] < 0 || padding[1] < 0 {
		return nil, errs.Inputf("nn: Unfold: kernel %v, stride %v and padding %v must be positive (padding may be 0)", kernel, stride, padding)
	}
	_, d := x.Dims()
	if d != in.Size() {
		return nil, errs.Inputf("nn: Unfold: the samples have %d values but shape %v holds %d", d, in, in.Size())
	}
	oh, ow, err := windowOut(in, kernel, stride, padding)
	if err != nil {
		return nil, fmt.Errorf("nn: Unfold: %w", err)
	}
	return unfold(x, in, kernel, stride, padding, oh, ow), nil
}

// Unfold is the im2col matrix of the samples x of shape in under this
// layer's kernel, stride and padding (see the function Unfold): the layer's
// output before the bias is c.Unfold(x, in)·c.Weightᵀ.
func (c *Conv2d) Unfold(x *mat.Dense, in FeatureShape) (*mat.Dense, error) {
	return Unfold(x, in, c.Kernel, c.Stride, c.Padding)
}

// unfold is Unfold without the checks, for an output of oh × ow positions.
func unfold(x *mat.Dense, in FeatureShape, kernel, stride, pad [2]int, oh, ow int) *mat.Dense {
	n, _ := x.Dims()
	kh, kw := kernel[0], kernel[1]
	k := in.C * kh * kw
	p := mat.NewDense(n*oh*ow, k, nil)
	dst := p.RawMatrix().Data
	hw := in.H * in.W
	for s := 0; s < n; s++ {
		src := x.RawRowView(s)
		for y := 0; y < oh; y++ {
			for xx := 0; xx < ow; xx++ {
				row := dst[((s*oh+y)*ow+xx)*k:][:k]
				col := 0
				for c := 0; c < in.C; c++ {
					plane := src[c*hw : (c+1)*hw]
					for i := 0; i < kh; i++ {
						iy := y*stride[0] - pad[0] + i
						if iy < 0 || iy >= in.H {
							col += kw // zeros: p is freshly allocated
							continue
						}
						line := plane[iy*in.W : (iy+1)*in.W]
						for j := 0; j < kw; j++ {
							if ix := xx*stride[1] - pad[1] + j; ix >= 0 && ix < in.W {
								row[col] = line[ix]
							}
							col++
						}
					}
				}
			}
		}
	}
	return p
}

// apply computes the conv: one GEMM of the unfolded patches with Weightᵀ,
// then the (sample·position) × channel result is laid out channel-major
// per sample, adding the bias.
func (c *Conv2d) apply(x *mat.Dense, in, out FeatureShape) *mat.Dense {
	n, _ := x.Dims()
	p := unfold(x, in, c.Kernel, c.Strides(), c.Padding, out.H, out.W)
	var z mat.Dense
	z.Mul(p, c.Weight.T())
	res := mat.NewDense(n, out.Size(), nil)
	hw := out.H * out.W
	zr := z.RawMatrix()
	for s := 0; s < n; s++ {
		dst := res.RawRowView(s)
		for q := 0; q < hw; q++ {
			zrow := zr.Data[(s*hw+q)*zr.Stride:][:out.C]
			for o, v := range zrow {
				if c.Bias != nil {
					v += c.Bias[o]
				}
				dst[o*hw+q] = v
			}
		}
	}
	return res
}

// apply is max(x, 0), NaN mapped to 0 as MLP's ReLU does.
func (*ReLULayer) apply(x *mat.Dense, _, _ FeatureShape) *mat.Dense {
	r, c := x.Dims()
	res := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		dst := res.RawRowView(i)
		for j, v := range x.RawRowView(i) {
			if v > 0 {
				dst[j] = v
			}
		}
	}
	return res
}

// apply takes the maximum over each window, skipping the padding.
func (p *MaxPool2d) apply(x *mat.Dense, in, out FeatureShape) *mat.Dense {
	n, _ := x.Dims()
	res := mat.NewDense(n, out.Size(), nil)
	s, k, pad := p.Strides(), p.Kernel, p.Padding
	for smp := 0; smp < n; smp++ {
		src, dst := x.RawRowView(smp), res.RawRowView(smp)
		for c := 0; c < in.C; c++ {
			plane := src[c*in.H*in.W:][:in.H*in.W]
			oplane := dst[c*out.H*out.W:][:out.H*out.W]
			for y := 0; y < out.H; y++ {
				y0, y1 := max(y*s[0]-pad[0], 0), min(y*s[0]-pad[0]+k[0], in.H)
				for xx := 0; xx < out.W; xx++ {
					x0, x1 := max(xx*s[1]-pad[1], 0), min(xx*s[1]-pad[1]+k[1], in.W)
					m := math.Inf(-1)
					for iy := y0; iy < y1; iy++ {
						for _, v := range plane[iy*in.W+x0 : iy*in.W+x1] {
							if v > m {
								m = v
							}
						}
					}
					oplane[y*out.W+xx] = m
				}
			}
		}
	}
	return res
}

// apply returns x: a sample is stored flat already.
func (*Flatten) apply(x *mat.Dense, _, _ FeatureShape) *mat.Dense { return x }

// apply is x·Weightᵀ + Bias.
func (l *Linear) apply(x *mat.Dense, _, out FeatureShape) *mat.Dense {
	var z mat.Dense
	z.Mul(x, l.Weight.T())
	if l.Bias != nil {
		r, _ := z.Dims()
		for i := 0; i < r; i++ {
			row := z.RawRowView(i)
			for j, b := range l.Bias {
				row[j] += b
			}
		}
	}
	return &z
}

// Forward evaluates the network on the rows of x: n × In (one flattened
// C×H×W image per row, as x.reshape(n, -1) of an NCHW batch) gives n × Out,
// as the equivalent torch.nn.Sequential computes it. Each Conv2d is one
// matrix multiply of the unfolded inputs (Unfold) with its weight matrix.
// Samples are processed in fixed chunks by parallel goroutines, so the
// result does not depend on GOMAXPROCS. It panics if the network is invalid
// or x has the wrong number of columns (programming errors: Validate the
// network and check x against In when they come from a user).
func (c *CNN) Forward(x *mat.Dense) *mat.Dense {
	return c.forwardTo(x, len(c.Layers)-1)
}

// Hidden returns the output of layer `layer` (0-based) flattened per
// sample: n × Shapes()[layer+1].Size(). Hidden(x, len(Layers)-1) equals
// Forward(x); the input of a Conv2d at index i > 0 is Hidden(x, i−1), whose
// Unfold is the data of its compression. It panics if layer is out of
// range.
func (c *CNN) Hidden(x *mat.Dense, layer int) *mat.Dense {
	if layer < 0 || layer >= len(c.Layers) {
		panic(fmt.Sprintf("nn: CNN.Hidden: layer %d out of range [0, %d)", layer, len(c.Layers)))
	}
	return c.forwardTo(x, layer)
}

// forwardTo runs layers 0..last on x in parallel chunks.
func (c *CNN) forwardTo(x *mat.Dense, last int) *mat.Dense {
	shapes := c.mustShapes(x)
	n, d := x.Dims()
	width := shapes[last+1].Size()
	res := mat.NewDense(n, width, nil)
	chunks := (n + cnnChunk - 1) / cnnChunk
	parallel.For(chunks, func(_, ch int) {
		r0, r1 := ch*cnnChunk, min((ch+1)*cnnChunk, n)
		c.forwardRows(x.Slice(r0, r1, 0, d).(*mat.Dense), res.Slice(r0, r1, 0, width).(*mat.Dense), shapes, last)
	})
	return res
}

// mustShapes returns the layer shapes, panicking if the network is invalid
// or x does not have In columns.
func (c *CNN) mustShapes(x *mat.Dense) []FeatureShape {
	shapes, err := c.Shapes()
	if err != nil {
		panic(fmt.Sprintf("nn: CNN.Forward on an invalid network: %v", err))
	}
	if _, d := x.Dims(); d != c.In() {
		panic(fmt.Sprintf("nn: CNN.Forward: input has %d columns but the network takes %d (%v)", d, c.In(), c.Input))
	}
	return shapes
}

// forwardRows pushes the rows of x through layers 0..last, cnnChunk
// samples at a time, and writes the result into dst.
func (c *CNN) forwardRows(x, dst *mat.Dense, shapes []FeatureShape, last int) {
	n, d := x.Dims()
	_, width := dst.Dims()
	for r0 := 0; r0 < n; r0 += cnnChunk {
		r1 := min(r0+cnnChunk, n)
		h := x.Slice(r0, r1, 0, d).(*mat.Dense)
		for i := 0; i <= last; i++ {
			h = c.Layers[i].apply(h, shapes[i], shapes[i+1])
		}
		dst.Slice(r0, r1, 0, width).(*mat.Dense).Copy(h)
	}
}

// Evaluate scores the network as a classifier on x (n×In) with integer
// labels in [0, Out): accuracy and mean cross-entropy, in fixed chunks
// summed in order like MLP.Evaluate. Errors wrap ErrInput.
func (c *CNN) Evaluate(x *mat.Dense, labels []int) (Metrics, error) {
	shapes, err := c.Shapes()
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		return Metrics{}, err
	}
	last := len(c.Layers) - 1
	return evaluateChunks(x, labels, c.In(), c.Out(), func(xs, z *mat.Dense) {
		c.forwardRows(xs, z, shapes, last)
	})
}

// Predict returns the index of the largest output of each row of
// c.Forward(x) (the first one on ties), like torch.argmax(model(x), dim=1).
func (c *CNN) Predict(x *mat.Dense) []int { return ArgmaxRows(c.Forward(x)) }
