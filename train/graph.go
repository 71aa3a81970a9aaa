package train

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// DistillGraph is Distill for a Graph: it fits the constants params of g
// (the factors of a compressed graph's weights, their biases) in place so
// that g's outputs on the rows of x match teacher (n × Out()), with the
// same objective, options, early stopping on Holdout and determinism as
// Distill; the gradients are Graph.BatchGradient's. The other constants
// stay as they are. Errors caused by the input wrap ErrInput.
func DistillGraph(ctx context.Context, g *nn.Graph, params []string, x, teacher *mat.Dense, opt DistillOptions) (*Result, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := g.CheckConstants("DistillGraph", params); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("nn: DistillGraph: no constants to fit: %w", ErrInput)
	}
	// A batch's values are held from its forward run to its backward one,
	// and its gradients as they flow back.
	bs := opt.Options.withDefaults().BatchSize
	if x != nil {
		n, _ := x.Dims()
		bs = min(bs, n)
	}
	if err := dataio.CheckMemory(2*float64(bs)*g.SampleBytes(), fmt.Sprintf("nn: DistillGraph: the values and gradients of a batch of %d samples", bs), "use a smaller ", errs.Option{Struct: "DistillOptions", Field: "BatchSize"}); err != nil {
		return nil, err
	}
	return distill(ctx, "DistillGraph", newGraphTrainer(g, params), x, teacher, opt)
}

// graphTrainer is a Graph as a trainable: the constants named by names.
type graphTrainer struct {
	*nn.Graph
	names []string
	ps    []param
	grads [][]float64 // the ps' grad slices, for BatchGradient
}

func newGraphTrainer(g *nn.Graph, names []string) *graphTrainer {
	t := &graphTrainer{Graph: g, names: names}
	for _, name := range names {
		c := g.Consts[name]
		t.ps = append(t.ps, param{value: c.Data, grad: make([]float64, len(c.Data)), decay: len(c.Shape) > 1})
		t.grads = append(t.grads, t.ps[len(t.ps)-1].grad)
	}
	return t
}

func (t *graphTrainer) params() []param { return t.ps }

// gradient is Graph.BatchGradient of the batch's loss.
func (t *graphTrainer) gradient(x *mat.Dense, idx []int, loss batchLoss) (float64, int, error) {
	var l float64
	var ok int
	err := t.BatchGradient(x, idx, t.names, func(z, dz *mat.Dense) { l, ok = loss(z, dz, idx) }, t.grads)
	if err != nil {
		return 0, 0, err
	}
	return l, ok, nil
}
