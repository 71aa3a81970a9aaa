package compress

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// GraphRows is the largest number of rows a graph's weight is fit on: a
// MatMul inside a mixer or transformer block sees one row per token (or
// per channel), 28–64 rows per image for the Fashion-MNIST mixer, so a
// uniform seeded sample of this many rows is taken when there are more,
// the same rows in the original and the compressed stream (as for a
// conv's patches, ConvPatchRows).
const GraphRows = 32768

// GraphModule describes the data of one compressed weight of a graph.
type GraphModule struct {
	// Node is the MatMul or Gemm node, Weight its weight constant; Bias
	// the constant of the Add folded into the layer ("" if none).
	Node   string `json:"node"`
	Weight string `json:"weight"`
	Bias   string `json:"bias,omitempty"`
	// Rows is the number of calibration rows the weight was fit on, of
	// Total (images × the rows each image gives at that node).
	Rows  int `json:"rows"`
	Total int `json:"total"`
}

// GraphResult is what CompressGraph returns: the evidence of Result with
// one LayerReport per weight (LayerReport.Layer is the node's index in
// the original graph).
type GraphResult struct {
	Result
	// Model is the compressed graph: each factored weight W ≈ A·B is two
	// MatMul nodes (with Add nodes for the biases between and after).
	Model   *nn.Graph     `json:"-"`
	Modules []GraphModule `json:"modules"`
}

// graphLayer is one weight of the graph being compressed.
type graphLayer struct {
	node, add    int    // the MatMul/Gemm node and the folded Add node (-1: none)
	wName, bName string // their constants
	name, out    string // node name for errors, the layer's output value
	input        string // the layer's data input
	w            *mat.Dense
	bias         []float64
	act          nn.Activation
	rows         []int // sampled rows, nil = all
	total        int
	// repl replaces the node (and the folded Add) once compressed; nil
	// keeps them.
	repl   []nn.GraphNode
	consts map[string]*nn.GraphTensor
}

// CompressGraph compresses every weight of a Graph that multiplies a
// computed value — a MatMul by a constant 2-D weight, or a Gemm — to low
// rank from calibration samples x0 (rows, g.In() columns), with the
// per-layer machinery of CompressMLP: each weight's data-driven fit (Alg 2)
// uses the activations that reach it, every axis but the last flattened
// into rows (images × tokens in a mixer; a sample of GraphRows rows when
// there are more). A MatMul whose only use is an Add of a constant vector
// takes that Add as its bias. A rank-r result W ≈ A·B is written back as
// MatMul(x, A) then MatMul(·, B), with Adds for the biases. With
// Sequential the inputs X̌ are the compressed graph's own (Alg 3); targets
// are always the original pre-activations. Keep counts every
// floating-point constant of the graph; constants other than the weights
// and their biases are kept. Ranks has one entry per weight, in node
// order. AllocSensitivity and AllocASVD measure the graph's output with
// each weight compressed on the first GraphProbeSamples samples; Holdout
// is ignored with a warning. Distill fits the factors and their biases to
// the graph's outputs (graphSource.distill). Errors caused by the input
// wrap ErrInput.
func CompressGraph(ctx context.Context, g *nn.Graph, x0 *mat.Dense, o Options) (*GraphResult, error) {
	start := time.Now()
	if g == nil {
		return nil, fmt.Errorf("compress: no graph: %w", ErrInput)
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if err := checkCalibration(x0, g.In(), fmt.Sprintf("the graph takes %d inputs (samples of shape %v)", g.In(), g.InputShape)); err != nil {
		return nil, err
	}
	res := &GraphResult{}
	src := &graphSource{g: g}
	if err := compressLayers(ctx, src, x0, o, &res.Result, start); err != nil {
		return nil, err
	}
	res.Model, res.Modules = src.out, src.modules
	return res, nil
}

// graphSource is a Graph as a layerSource: its MatMul and Gemm nodes by a
// constant weight (graphLayers). The compressed graph's inputs of a layer
// are computed (by running the graph rewritten so far) only when the fit
// uses them, so without Sequential a layer's errors are on the original
// inputs.
type graphSource struct {
	g  *nn.Graph
	ls []*graphLayer
	x0 *mat.Dense
	xs []*mat.Dense
	// same reports that the rewritten graph still computes the original
	// inputs.
	same bool
	// run is the rewritten graph's run over x0, paused at the last layer
	// whose inputs were read from it (nn.GraphRun).
	run     *nn.GraphRun
	modules []GraphModule
	out     *nn.Graph
}

func (s *graphSource) kind() string { return "graph" }

func (s *graphSource) original() nn.Network { return s.g }

func (s *graphSource) layers() ([]sourceLayer, error) {
	s.ls = graphLayers(s.g)
	if len(s.ls) == 0 {
		return nil, fmt.Errorf("compress: the graph has no MatMul or Gemm by a constant weight to compress: %w", ErrInput)
	}
	out := make([]sourceLayer, len(s.ls))
	for j, l := range s.ls {
		out[j] = sourceLayer{w: l.w, bias: l.bias, act: l.act, index: l.node, name: fmt.Sprintf("node %q", l.name)}
	}
	return out, nil
}

// stream runs the graph once, keeping the rows that reach every weight (a
// seeded sample of GraphRows of them when there are more).
func (s *graphSource) stream(_ context.Context, x0 *mat.Dense) (xs, ys []*mat.Dense, err error) {
	s.x0, s.same = x0, true
	nodes := make([]int, len(s.ls))
	for j, l := range s.ls {
		nodes[j] = l.node
	}
	pick := func(j, total int) []int {
		s.ls[j].total = total
		if total > GraphRows {
			s.ls[j].rows = samplePatchRows(total, GraphRows, uint64(s.ls[j].node))
		}
		return s.ls[j].rows
	}
	if s.xs, err = s.g.InputRows(x0, nodes, pick); err != nil {
		return nil, nil, fmt.Errorf("compress: %w", err)
	}
	ys = make([]*mat.Dense, len(s.ls))
	for j, l := range s.ls {
		ys[j] = preact(s.xs[j], l.w, l.bias)
	}
	return s.xs, ys, nil
}

func (s *graphSource) input(j int, fit bool) (*mat.Dense, error) {
	if !fit || s.same {
		return nil, nil
	}
	l := s.ls[j]
	cur, index := buildGraph(s.g, s.ls)
	if s.run == nil {
		// The first layer whose inputs changed: a run of the rewritten
		// graph starts, and each later layer resumes it where it paused.
		// When the values of all samples do not fit the memory budget,
		// every layer runs the graph from its start instead.
		run, err := cur.Start(s.x0)
		if err != nil && !errors.Is(err, dataio.ErrTooLarge) {
			return nil, fmt.Errorf("compress: %w", err)
		}
		s.run = run
	}
	if s.run != nil {
		x, err := s.run.Advance(cur, index[l.node], func(int) []int { return l.rows })
		if err != nil {
			return nil, fmt.Errorf("compress: %w", err)
		}
		return x, nil
	}
	one, err := cur.InputRows(s.x0, []int{index[l.node]}, func(int, int) []int { return l.rows })
	if err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	return one[0], nil
}

// write rewrites the layer's nodes unless it stays dense as it is, and
// builds the compressed graph after the last one.
func (s *graphSource) write(j int, step layerOutcome, _ *mat.Dense, _ *LayerReport) error {
	l := s.ls[j]
	switch {
	case step.dense && step.refit != nil:
		l.setDense(mat.DenseCopyOf(step.refit.Weight.T()), step.refit.Bias)
		s.same = false
	case !step.dense:
		l.setFactored(step.f)
		s.same = false
	}
	rows, _ := s.xs[j].Dims()
	s.modules = append(s.modules, GraphModule{Node: l.name, Weight: l.wName, Bias: l.bName, Rows: rows, Total: l.total})
	if j+1 == len(s.ls) {
		s.out, _ = buildGraph(s.g, s.ls)
	}
	return nil
}

func (s *graphSource) model() nn.Network { return s.out }

// distill fits the constants of the rewritten weights (the factors and
// their biases) to the original graph's outputs; the other constants stay.
// The objective defaults to "logits", the outputs' squared error: a
// graph's outputs need not be class logits.
func (s *graphSource) distill(ctx context.Context, o DistillOptions, progress func(string, int, int)) (*DistillReport, error) {
	var names []string
	for _, l := range s.ls {
		if l.repl != nil {
			names = append(names, slices.Sorted(maps.Keys(l.consts))...)
		}
	}
	if len(names) == 0 {
		return nil, nil // every weight kept as it was
	}
	if o.Objective == "" {
		o.Objective = train.ObjectiveLogits
	}
	for _, l := range s.ls {
		l.balance()
	}
	g := s.out
	return distill(ctx, s.g, student{net: g, fit: func(ctx context.Context, x, teacher *mat.Dense, no train.DistillOptions) (*train.Result, error) {
		return train.DistillGraph(ctx, g, names, x, teacher, no)
	}}, s.x0, o, progress)
}

// GraphProbeSamples is how many calibration samples (the first ones) the
// measured allocations of a graph run through it per measurement: each is
// a forward pass of the whole graph with one weight compressed, and
// relative output errors of one network are compared, which a few
// thousand rows of tokens estimate well.
const GraphProbeSamples = 256

// probe measures the graph's outputs with one weight replaced by its fit
// at a rank, on the first GraphProbeSamples calibration samples, running
// only the nodes from that weight's on (the values before it are the
// original graph's). The later weights are not refit (refit is ignored).
func (s *graphSource) probe(costs []layerCost, fits []*Fit, _ bool) *probe {
	n, d := s.x0.Dims()
	x := s.x0.Slice(0, min(n, GraphProbeSamples), 0, d).(*mat.Dense)
	vals, err := s.g.Values(x)
	output := func(j int, f Factored) (*mat.Dense, error) {
		if err != nil {
			return nil, fmt.Errorf("compress: %w", err)
		}
		l := *s.ls[j]
		l.setFactored(f)
		g, _ := buildGraph(s.g, []*graphLayer{&l})
		return g.ForwardFrom(vals, l.node)
	}
	var ref *mat.Dense
	if err == nil {
		ref, err = s.g.ForwardFrom(vals, len(s.g.Nodes))
	}
	return newOutputProbe(ref, output, costs, fits)
}

// graphLayers finds the weights to compress: MatMul nodes by a constant
// 2-D weight used nowhere else whose data input holds the samples on an
// axis of their own (nn.Graph.SampleAxis; attention's Q, K, V, output and
// MLP weights on [N, tokens, width] do, a weight on a [tokens·N, width]
// reshape is kept as it is), and Gemm nodes with transA 0, a constant
// B used nowhere else and a constant bias of one value or one per output;
// a MatMul's only consumer that is an Add of a constant vector of its
// width is folded in as its bias. The activation is ReLU when the layer's
// output feeds only a Relu.
func graphLayers(g *nn.Graph) []*graphLayer {
	uses := map[string][]int{}
	for i, n := range g.Nodes {
		for _, in := range n.Inputs {
			uses[in] = append(uses[in], i)
		}
	}
	uses[g.Output] = append(uses[g.Output], -1)
	constVec := func(name string, width int) []float64 {
		t, ok := g.Consts[name]
		if !ok || t.Int || len(uses[name]) != 1 {
			return nil
		}
		if numel(t.Shape) == width && (len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] == width || width == 1) {
			return slices.Clone(t.Data)
		}
		return nil
	}
	var out []*graphLayer
	for i, n := range g.Nodes {
		if (n.Op != "MatMul" && n.Op != "Gemm") || len(n.Inputs) < 2 {
			continue
		}
		if _, isConst := g.Consts[n.Inputs[0]]; isConst || g.SampleAxis(i) < 0 {
			continue // no rows of one sample each to fit on
		}
		wt, ok := g.Consts[n.Inputs[1]]
		if !ok || wt.Int || len(wt.Shape) != 2 || len(uses[n.Inputs[1]]) != 1 {
			continue
		}
		l := &graphLayer{node: i, add: -1, wName: n.Inputs[1], name: n.Name, input: n.Inputs[0], out: n.Outputs[0], act: nn.Identity}
		if l.name == "" {
			l.name = fmt.Sprintf("#%d (%s)", i, n.Op)
		}
		l.w = mat.NewDense(wt.Shape[0], wt.Shape[1], slices.Clone(wt.Data))
		if n.Op == "Gemm" {
			if attrInt(n, "transA") != 0 {
				continue
			}
			if attrInt(n, "transB") != 0 {
				l.w = mat.DenseCopyOf(l.w.T())
			}
			if a, ok := n.Attrs["alpha"]; ok && a.Kind == "float" && a.F != 1 {
				l.w.Scale(a.F, l.w)
			}
			_, m := l.w.Dims()
			if len(n.Inputs) > 2 && n.Inputs[2] != "" {
				b := constVec(n.Inputs[2], m)
				if b == nil {
					if t, ok := g.Consts[n.Inputs[2]]; !ok || numel(t.Shape) != 1 || len(uses[n.Inputs[2]]) != 1 {
						continue
					}
					b = slices.Repeat(g.Consts[n.Inputs[2]].Data, m)
				}
				if a, ok := n.Attrs["beta"]; ok && a.Kind == "float" && a.F != 1 {
					for k := range b {
						b[k] *= a.F
					}
				}
				l.bias, l.bName = b, n.Inputs[2]
			}
		} else if u := uses[l.out]; len(u) == 1 && u[0] >= 0 && g.Nodes[u[0]].Op == "Add" && len(g.Nodes[u[0]].Inputs) == 2 {
			add := g.Nodes[u[0]]
			other := add.Inputs[0]
			if other == l.out {
				other = add.Inputs[1]
			}
			_, m := l.w.Dims()
			if b := constVec(other, m); b != nil && other != l.out {
				l.add, l.bias, l.bName, l.out = u[0], b, other, add.Outputs[0]
			}
		}
		if u := uses[l.out]; len(u) == 1 && u[0] >= 0 && g.Nodes[u[0]].Op == "Relu" {
			l.act = nn.ReLU
		}
		out = append(out, l)
	}
	return out
}

func attrInt(n nn.GraphNode, name string) int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == "int" {
		return a.I
	}
	return 0
}

func numel(shape []int) int {
	p := 1
	for _, d := range shape {
		p *= d
	}
	return p
}

// prefix names the constants and values of a rewritten layer.
func (l *graphLayer) prefix() string {
	return l.wName
}

// setDense rewrites the layer as MatMul(x, w) (+ Add(bias)), w in × out.
func (l *graphLayer) setDense(w *mat.Dense, bias []float64) {
	p := l.prefix()
	k, m := w.Dims()
	l.consts = map[string]*nn.GraphTensor{p: {Shape: []int{k, m}, Data: denseRows(w)}}
	l.repl = nil
	l.emit(l.input, p, bias, p+".bias", l.out)
}

// setFactored rewrites the layer as MatMul(x, A) (+ InBias), MatMul(·, B)
// (+ Bias).
func (l *graphLayer) setFactored(f Factored) {
	p := l.prefix()
	d, r := f.A.Dims()
	_, m := f.B.Dims()
	l.consts = map[string]*nn.GraphTensor{
		p + ".A": {Shape: []int{d, r}, Data: denseRows(f.A)},
		p + ".B": {Shape: []int{r, m}, Data: denseRows(f.B)},
	}
	l.repl = nil
	mid := p + ".A_output"
	l.emit(l.input, p+".A", f.InBias, p+".A.bias", mid)
	l.emit(mid, p+".B", f.Bias, p+".B.bias", l.out)
}

// balance gives the two factors of a factored layer equal norms per inner
// unit (nn.BalanceUnit, as nn.MLP.BalanceFactors before distillation): a
// fit leaves the whole scale in one factor, and Adam's steps of a fixed
// size would then move the two very unequally.
func (l *graphLayer) balance() {
	p := l.prefix()
	a, b := l.consts[p+".A"], l.consts[p+".B"]
	if a == nil || b == nil {
		return // a dense layer
	}
	am := mat.NewDense(a.Shape[0], a.Shape[1], a.Data)
	bm := mat.NewDense(b.Shape[0], b.Shape[1], b.Data)
	var inBias []float64
	if t := l.consts[p+".A.bias"]; t != nil {
		inBias = t.Data
	}
	for k := 0; k < a.Shape[1]; k++ {
		var bk *float64
		if inBias != nil {
			bk = &inBias[k]
		}
		nn.BalanceUnit(am.ColView(k).(*mat.VecDense), bm.RowView(k).(*mat.VecDense), bk)
	}
}

// emit appends MatMul(in, w) and, with a bias, an Add, ending at out.
func (l *graphLayer) emit(in, w string, bias []float64, bname, out string) {
	mmOut := out
	if bias != nil {
		mmOut = w + "_matmul"
	}
	l.repl = append(l.repl, nn.GraphNode{Name: w + "/MatMul", Op: "MatMul", Inputs: []string{in, w}, Outputs: []string{mmOut}})
	if bias != nil {
		l.consts[bname] = &nn.GraphTensor{Shape: []int{len(bias)}, Data: slices.Clone(bias)}
		l.repl = append(l.repl, nn.GraphNode{Name: w + "/Add", Op: "Add", Inputs: []string{mmOut, bname}, Outputs: []string{out}})
	}
}

// denseRows returns m's entries row-major, copied.
func denseRows(m *mat.Dense) []float64 {
	r, c := m.Dims()
	out := make([]float64, 0, r*c)
	for i := 0; i < r; i++ {
		out = append(out, m.RawRowView(i)[:c]...)
	}
	return out
}

// buildGraph returns g with the rewritten layers replaced, and the index
// of each original node kept in the new graph.
func buildGraph(g *nn.Graph, layers []*graphLayer) (*nn.Graph, map[int]int) {
	out := &nn.Graph{Input: g.Input, InputShape: slices.Clone(g.InputShape), Output: g.Output, Consts: map[string]*nn.GraphTensor{}, Opset: g.Opset}
	for k, t := range g.Consts {
		out.Consts[k] = t
	}
	byNode, skip := map[int]*graphLayer{}, map[int]bool{}
	for _, l := range layers {
		if l.repl == nil {
			continue
		}
		byNode[l.node] = l
		if l.add >= 0 {
			skip[l.add] = true
		}
		delete(out.Consts, l.wName)
		if l.bName != "" {
			delete(out.Consts, l.bName)
		}
		for k, t := range l.consts {
			out.Consts[k] = t
		}
	}
	index := map[int]int{}
	for i, n := range g.Nodes {
		if l, ok := byNode[i]; ok {
			out.Nodes = append(out.Nodes, l.repl...)
			continue
		}
		if skip[i] {
			continue
		}
		index[i] = len(out.Nodes)
		out.Nodes = append(out.Nodes, n)
	}
	return out, index
}
