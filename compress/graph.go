package compress

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
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
// order. AllocSensitivity and AllocASVD are not available; Holdout is
// ignored with a warning. Errors caused by the input wrap ErrInput.
func CompressGraph(ctx context.Context, g *nn.Graph, x0 *mat.Dense, o Options) (*GraphResult, error) {
	start := time.Now()
	if g == nil {
		return nil, fmt.Errorf("compress: no graph: %w", ErrInput)
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if x0 == nil {
		return nil, fmt.Errorf("compress: no calibration data: %w", ErrInput)
	}
	n, d := x0.Dims()
	if d != g.In() {
		return nil, fmt.Errorf("compress: calibration data has %d columns but the graph takes %d inputs (samples of shape %v): %w", d, g.In(), g.InputShape, ErrInput)
	}
	if err := finite("calibration data", x0); err != nil {
		return nil, err
	}
	res := &GraphResult{}
	res.Sequential = o.Sequential
	if o.Holdout != nil {
		res.Warnings = append(res.Warnings, "held-out per-layer errors are not computed for a graph; Options.Holdout was ignored")
	}
	if o.Distill.Epochs > 0 {
		return nil, fmt.Errorf("compress: distillation (Options.Distill) is implemented for MLPs only, not for a graph; compress without it: %w", ErrInput)
	}
	layers := graphLayers(g)
	L := len(layers)
	if L == 0 {
		return nil, fmt.Errorf("compress: the graph has no MatMul or Gemm by a constant weight to compress: %w", ErrInput)
	}
	mode, lo, err := o.prepare(&res.Result, L)
	if err != nil {
		return nil, err
	}
	if mode == "keep" && (o.Allocation == AllocSensitivity || o.Allocation == AllocASVD) {
		return nil, fmt.Errorf("compress: the %s allocation measures an MLP's output and is not available for a graph; use %s, %s or %s: %w",
			o.Allocation, AllocGlobal, AllocUniform, AllocSVDLLM2, ErrInput)
	}
	res.DenseParams = g.NumParams()
	res.DenseMultiplyAdds = g.MultiplyAdds()
	res.CalibrationRows = n

	nodes := make([]int, L)
	for j, l := range layers {
		nodes[j] = l.node
	}
	pick := func(j, total int) []int {
		layers[j].total = total
		if total > GraphRows {
			layers[j].rows = samplePatchRows(total, GraphRows, uint64(layers[j].node))
		}
		return layers[j].rows
	}
	xs, err := g.InputRows(x0, nodes, pick)
	if err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	ys := make([]*mat.Dense, L)
	costs := make([]layerCost, L)
	other := res.DenseParams
	for j, l := range layers {
		ys[j] = preact(xs[j], l.w, l.bias)
		k, m := l.w.Dims()
		costs[j] = newLayerCost(k, m, l.bias != nil, o.Method, lo)
		other -= costs[j].dense
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	var ranks []int
	var pre []*Fit
	if mode == "keep" {
		res.Budget = int(math.Floor(o.Keep * float64(res.DenseParams)))
		budget := res.Budget - other
		sur := &nn.MLP{Layers: make([]nn.Layer, L)}
		ws := make([]*mat.Dense, L)
		for j, l := range layers {
			ws[j] = l.w
			sur.Layers[j] = nn.Layer{Weight: mat.DenseCopyOf(l.w.T()), Bias: l.bias, Act: l.act}
		}
		if ranks, pre, err = o.allocateLayers(ctx, sur, ws, xs, ys, costs, budget, lo); err != nil {
			return nil, err
		}
	}

	same := true // the compressed graph still computes the original inputs
	res.Params = other
	for j, l := range layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lstart := time.Now()
		xo, xc := xs[j], xs[j]
		if o.Sequential && o.Method != MethodSVDLLM && !same {
			cur, index := buildGraph(g, layers)
			one, err := cur.InputRows(x0, []int{index[l.node]}, func(int, int) []int { return l.rows })
			if err != nil {
				return nil, fmt.Errorf("compress: %w", err)
			}
			xc = one[0]
		}
		k, m := l.w.Dims()
		rep := LayerReport{Layer: l.node, In: k, Out: m, DenseParams: costs[j].dense, MaxRank: min(k, m), Converged: true}
		prob := Problem{W: l.w, Bias: l.bias, Act: l.act, X: xo, y: ys[j]}
		if xc != xo {
			prob.Xc = xc
		}
		r := 0
		switch mode {
		case "keep":
			r = ranks[j]
		case "ranks":
			r = o.Ranks[j]
		}
		var pf *Fit
		if pre != nil {
			pf = pre[j]
		}
		step, err := o.fitStep(layerStep{index: j, prob: prob, cost: costs[j], mode: mode, rank: r, pre: pf}, lo, &rep, &res.Warnings)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", l.name, err)
		}
		var yc, ycLocal *mat.Dense
		switch {
		case step.dense && step.refit == nil:
			yc, ycLocal = preact(xc, l.w, l.bias), ys[j]
		case step.dense:
			w := mat.DenseCopyOf(step.refit.Weight.T())
			l.setDense(w, step.refit.Bias)
			yc, ycLocal = preact(xc, w, step.refit.Bias), preact(xo, w, step.refit.Bias)
			same = false
		default:
			l.setFactored(step.f)
			yc, ycLocal = step.f.Apply(xc), step.f.Apply(xo)
			same = false
		}
		yn := math.Max(mat.Norm(ys[j], 2), 1e-300)
		rep.Error = diffNorm(ys[j], yc) / yn
		rep.LocalError = diffNorm(ys[j], ycLocal) / yn
		rep.Seconds = time.Since(lstart).Seconds()
		res.Params += rep.Params
		res.Layers = append(res.Layers, rep)
		rows, _ := xo.Dims()
		res.Modules = append(res.Modules, GraphModule{Node: l.name, Weight: l.wName, Bias: l.bName, Rows: rows, Total: l.total})
		if o.Progress != nil {
			o.Progress("compress", j+1, L)
		}
	}
	res.Model, _ = buildGraph(g, layers)
	if err := res.Model.Validate(); err != nil {
		return nil, fmt.Errorf("compress: internal error: the compressed graph is invalid: %v", err)
	}
	if p := res.Model.NumParams(); p != res.Params {
		return nil, fmt.Errorf("compress: internal error: the compressed graph has %d parameters, the layers report %d", p, res.Params)
	}
	res.MultiplyAdds = res.Model.MultiplyAdds()
	res.Kept = float64(res.Params) / float64(res.DenseParams)
	if res.Budget > 0 && res.Params > res.Budget {
		return nil, fmt.Errorf("compress: internal error: %d parameters exceed the budget of %d", res.Params, res.Budget)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// graphLayers finds the weights to compress: MatMul nodes by a constant
// 2-D weight used nowhere else, and Gemm nodes with transA 0, a constant
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
		if _, isConst := g.Consts[n.Inputs[0]]; isConst {
			continue
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
	out := &nn.Graph{Input: g.Input, InputShape: slices.Clone(g.InputShape), Output: g.Output, Consts: map[string]*nn.GraphTensor{}}
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
