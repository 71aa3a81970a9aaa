package nn

import (
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
)

// SampleBytes returns the memory the values of one sample's run of the
// graph take, in float64, as Validate measures them (0 before Validate):
// what a caller that holds a batch's values to run them back
// (BatchGradient) checks against the memory budget.
func (g *Graph) SampleBytes() float64 { return g.sampleBytes }

// CheckConstants returns an error wrapping ErrInput unless every name is a
// floating-point constant of the graph (not an integer one, a computed
// value or the input): the constants Gradient and BatchGradient
// differentiate with respect to. caller names the caller in the message.
func (g *Graph) CheckConstants(caller string, names []string) error {
	return g.checkParams(caller, names)
}

// gradChunk is how many samples of a batch one worker runs forward and
// back; the chunks' gradients are added in order, so the result does not
// depend on GOMAXPROCS.
const gradChunk = 16

// BatchGradient is Gradient for a step of training on the samples idx of x
// (rows of x, in that order): it runs them forward in chunks of gradChunk
// samples on all cores, gives their outputs z (len(idx) × Out(), one row
// per sample) to loss, which writes the loss's gradient with respect to z
// into dz (same shape), runs each chunk back, and writes the gradient with
// respect to the constants wrt into grads (grads[j] as long as wrt[j]'s
// Data), the chunks' gradients added in order. A trainer calls it at every
// step, so it does not check again what it is given once: g must have
// passed Validate and wrt CheckConstants.
func (g *Graph) BatchGradient(x *mat.Dense, idx []int, wrt []string, loss func(z, dz *mat.Dense), grads [][]float64) error {
	b, out := len(idx), g.Out()
	_, d := x.Dims()
	chunks := (b + gradChunk - 1) / gradChunk
	envs := make([]map[string]value, chunks)
	errs := make([]error, chunks)
	z := mat.NewDense(b, out, nil)
	parallel.For(chunks, func(_, c int) {
		r0, r1 := c*gradChunk, min((c+1)*gradChunk, b)
		xb := mat.NewDense(r1-r0, d, nil)
		for r := r0; r < r1; r++ {
			copy(xb.RawRowView(r-r0), x.RawRowView(idx[r]))
		}
		if envs[c], errs[c] = g.run(g.batch(xb), nil); errs[c] == nil {
			copy(z.RawMatrix().Data[r0*out:r1*out], envs[c][g.Output].data)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	dz := mat.NewDense(b, out, nil)
	loss(z, dz)
	chunkGrads := make([][][]float64, chunks)
	parallel.For(chunks, func(_, c int) {
		r0, r1 := c*gradChunk, min((c+1)*gradChunk, b)
		chunkGrads[c], errs[c] = g.backward(envs[c], dz.RawMatrix().Data[r0*out:r1*out], wrt)
		envs[c] = nil
	})
	for _, gr := range grads {
		clear(gr)
	}
	for c, gs := range chunkGrads {
		if errs[c] != nil {
			return errs[c]
		}
		for j, gr := range grads {
			addTo(gr, gs[j])
		}
	}
	return nil
}
