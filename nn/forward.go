package nn

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/blasbackend"
	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/parallel"
)

// forwardChunk is the number of rows pushed through the network at once by
// one goroutine. It is a constant, not derived from GOMAXPROCS, so every row
// is computed by the same sequence of floating-point operations on any
// machine: results are bit-identical whatever the parallelism. 256 rows keep
// a chunk's activations in cache for widths up to a few hundred while still
// giving gonum's matrix multiply blocks large enough to be efficient.
const forwardChunk = 256

// Forward evaluates the network on the rows of x: an n×In matrix gives an
// n×Out matrix, each layer computing act(H·Wᵀ + b). Rows are processed in
// fixed chunks by parallel goroutines; the result does not depend on
// GOMAXPROCS. It panics if x has the wrong number of columns (a programming
// error: check widths against m.In() when they come from user input).
func (m *MLP) Forward(x *mat.Dense) *mat.Dense {
	return m.forwardTo(x, len(m.Layers)-1)
}

// Hidden returns the activations after layer `layer` (0-based, activation
// included): Hidden(x, 0) is act₀(X·W₀ᵀ + b₀), and Hidden(x, len(m.Layers)-1)
// equals Forward(x). It panics if layer is out of range or x has the wrong
// number of columns.
func (m *MLP) Hidden(x *mat.Dense, layer int) *mat.Dense {
	if layer < 0 || layer >= len(m.Layers) {
		panic(fmt.Sprintf("nn: Hidden: layer %d out of range [0, %d)", layer, len(m.Layers)))
	}
	return m.forwardTo(x, layer)
}

// forwardTo runs layers 0..last on x.
func (m *MLP) forwardTo(x *mat.Dense, last int) *mat.Dense {
	n, d := x.Dims()
	if d != m.In() {
		panic(fmt.Sprintf("nn: Forward: input has %d columns but the network takes %d", d, m.In()))
	}
	out := m.Layers[last].Out()
	res := mat.NewDense(n, out, nil)
	wt := m.transposedWeights(last)
	chunks := (n + forwardChunk - 1) / forwardChunk
	parallel.For(chunks, func(_, c int) {
		r0 := c * forwardChunk
		r1 := min(r0+forwardChunk, n)
		m.forwardRows(x.Slice(r0, r1, 0, d).(*mat.Dense), res.Slice(r0, r1, 0, out).(*mat.Dense), last, wt)
	})
	return res
}

// transposedWeights returns Wᵀ of layers 0..last, each copied once per
// forward pass, for the pure-Go build's row kernel (internal/kern: about
// 3× gonum's matrix multiply on 16384 rows of a 100-100-100 network, one
// core, 49–58 ms against 153–156 ms in BenchmarkForwardKernel); nil with a
// native BLAS (the openblas build tag), whose matrix multiply is faster
// than both.
func (m *MLP) transposedWeights(last int) []*mat.Dense {
	if blasbackend.Native() {
		return nil
	}
	wt := make([]*mat.Dense, last+1)
	for i := range wt {
		wt[i] = mat.DenseCopyOf(m.Layers[i].Weight.T())
	}
	return wt
}

// forwardRows pushes the rows of x through layers 0..last and writes the
// result into dst (a view of the output matrix); wt, when non-nil, holds
// the layers' transposed weights (transposedWeights).
func (m *MLP) forwardRows(x, dst *mat.Dense, last int, wt []*mat.Dense) {
	h := x
	for i := 0; i <= last; i++ {
		l := m.Layers[i]
		var z *mat.Dense
		if i == last {
			z = dst
		} else {
			r, _ := h.Dims()
			z = mat.NewDense(r, l.Out(), nil)
		}
		if wt == nil {
			z.Mul(h, l.Weight.T())
		} else {
			hr, zr, w := h.RawMatrix(), z.RawMatrix(), wt[i].RawMatrix()
			kern.MulRows(zr.Data, zr.Stride, hr.Data, hr.Stride, w.Data, w.Stride, hr.Rows, hr.Cols, w.Cols)
		}
		var act func(float64) float64 // other than ReLU and identity
		if l.Act != ReLU && l.Act != Identity {
			act = l.Act.Func()
		}
		raw := z.RawMatrix()
		for r := 0; r < raw.Rows; r++ {
			row := raw.Data[r*raw.Stride : r*raw.Stride+raw.Cols]
			if l.Bias != nil {
				for j, b := range l.Bias {
					row[j] += b
				}
			}
			if l.Act == ReLU {
				for j, v := range row {
					if !(v > 0) { // also maps NaN to 0, as Activation.Apply does
						row[j] = 0
					}
				}
			} else if act != nil {
				for j, v := range row {
					row[j] = act(v)
				}
			}
		}
		h = z
	}
}
