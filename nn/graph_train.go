package nn

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
)

// DistillGraph is Distill for a Graph: it fits the constants params of g
// (the factors of a compressed graph's weights, their biases) in place so
// that g's outputs on the rows of x match teacher (n × Out()), with the
// same objective, options, early stopping on Holdout and determinism as
// Distill; the gradients are Graph.Gradient's. The other constants stay as
// they are. Errors caused by the input wrap ErrInput.
func DistillGraph(ctx context.Context, g *Graph, params []string, x, teacher *mat.Dense, opt DistillOptions) (*TrainResult, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := g.checkParams("DistillGraph", params); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("nn: DistillGraph: no constants to fit: %w", ErrInput)
	}
	// A batch's values are held from its forward run to its backward one,
	// and its gradients as they flow back.
	bs := opt.TrainOptions.withDefaults().BatchSize
	if x != nil {
		n, _ := x.Dims()
		bs = min(bs, n)
	}
	if err := dataio.CheckMemory(2*float64(bs)*g.sampleBytes, fmt.Sprintf("nn: DistillGraph: the values and gradients of a batch of %d samples", bs), "use a smaller ", errs.Option{Struct: "DistillOptions", Field: "BatchSize"}); err != nil {
		return nil, err
	}
	return distill(ctx, "DistillGraph", newGraphTrainer(g, params), x, teacher, opt)
}

// graphTrainer is a Graph as a trainable: the constants named by names.
type graphTrainer struct {
	*Graph
	names []string
	ps    []param
}

func newGraphTrainer(g *Graph, names []string) *graphTrainer {
	t := &graphTrainer{Graph: g, names: names}
	for _, name := range names {
		c := g.Consts[name]
		t.ps = append(t.ps, param{value: c.Data, grad: make([]float64, len(c.Data)), decay: len(c.Shape) > 1})
	}
	return t
}

func (t *graphTrainer) params() []param { return t.ps }

// gradChunk is how many samples of a batch one worker runs forward and
// back; the chunks' gradients are added in order, so the result does not
// depend on GOMAXPROCS.
const gradChunk = 16

// gradient runs the batch forward in chunks of gradChunk samples, scores
// the whole batch's outputs with loss, and runs each chunk back.
func (t *graphTrainer) gradient(x *mat.Dense, idx []int, loss batchLoss) (float64, int, error) {
	b, out := len(idx), t.Out()
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
		if envs[c], errs[c] = t.run(t.batch(xb), nil); errs[c] == nil {
			copy(z.RawMatrix().Data[r0*out:r1*out], envs[c][t.Output].data)
		}
	})
	for _, err := range errs {
		if err != nil {
			return 0, 0, err
		}
	}
	grad := mat.NewDense(b, out, nil)
	l, ok := loss(z, grad, idx)
	grads := make([][][]float64, chunks)
	parallel.For(chunks, func(_, c int) {
		r0, r1 := c*gradChunk, min((c+1)*gradChunk, b)
		grads[c], errs[c] = t.backward(envs[c], grad.RawMatrix().Data[r0*out:r1*out], t.names)
		envs[c] = nil
	})
	for _, p := range t.ps {
		clear(p.grad)
	}
	for c, gs := range grads {
		if errs[c] != nil {
			return 0, 0, errs[c]
		}
		for j, p := range t.ps {
			addTo(p.grad, gs[j])
		}
	}
	return l, ok, nil
}
