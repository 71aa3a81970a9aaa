package nn

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
)

// Graph is a feed-forward ONNX computation graph evaluated on a batch:
// residual, mixer and transformer networks as torch.onnx.export writes
// them, whose input and output hold the samples on the first axis (an
// image as 28 tokens × 28 channels is one [28, 28] sample). Nodes run in
// their order, which must be topological (torch.onnx.export writes them
// so); weights are constant tensors. The operators (graphOps) are the
// linear algebra of dense and attention layers (MatMul of any two values,
// Gemm), numpy-broadcast arithmetic, the activations and normalisations of
// transformers (Relu, Erf and Tanh for GELU, Softmax, LayerNormalization
// or its decomposition), tensor layout (Transpose, Reshape, Flatten,
// Gather, Slice, Split, Concat, ...) and the integer shape arithmetic a
// dynamic batch axis produces (Shape, Cast, Expand, ConstantOfShape,
// Where, ...). Every value is evaluated in float64; integer tensors are
// float64 values marked as integers. Validate checks that no node mixes
// samples. Each row of the Forward input is one sample flattened
// row-major to In() values.
type Graph struct {
	// Input names the data input; InputShape is one sample's shape (the
	// batch axis left out).
	Input      string
	InputShape []int
	Output     string
	Nodes      []GraphNode
	// Consts are the weights and other constants (initializers and
	// Constant nodes) by name.
	Consts map[string]*GraphTensor
	// Opset is the ONNX operator set the nodes follow (0: 13), which
	// decides the few operator semantics that changed across opsets
	// (Softmax's axis) and is written back by WriteGraphONNX.
	Opset int

	// Filled by Validate: one sample's output shape, the multiply-adds
	// of the MatMul and Gemm nodes per sample, the bytes one sample's
	// evaluation allocates (its input and every node's output), and for
	// each node the axis of its first input that holds the samples (-1
	// when no axis holds them alone).
	outShape    []int
	madds       int
	sampleBytes float64
	sampleAxis  []int
}

// GraphTensor is a constant tensor, row-major.
type GraphTensor struct {
	Shape []int
	Data  []float64
	// Int marks an integer tensor (a Reshape's shape), written as INT64.
	Int bool
}

// GraphNode is one ONNX node.
type GraphNode struct {
	Name, Op        string
	Inputs, Outputs []string
	Attrs           map[string]GraphAttr
}

// GraphAttr is an integer, float, integer-list or tensor attribute of a
// node.
type GraphAttr struct {
	Kind string // "int", "float", "ints" or "tensor"
	I    int64
	F    float64
	Ints []int64
	T    *GraphTensor
}

// GraphOps returns the supported operators, in a new slice.
func GraphOps() []string { return slices.Clone(graphOps) }

// graphOps are the supported operators.
var graphOps = []string{
	"MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Where",
	"Relu", "Sqrt", "Erf", "Tanh", "Softmax", "ReduceMean", "LayerNormalization",
	"Transpose", "Reshape", "Flatten", "Gather", "Slice", "Split", "Concat", "Unsqueeze", "Squeeze",
	"Shape", "Cast", "Expand", "ConstantOfShape", "Identity", "Dropout",
}

// graphArity is the number of inputs each operator takes: at least [0]
// (required, named), at most [1] (the rest optional: Gemm's bias C,
// Dropout's ratio and training mode, the axes of opset 13 and later).
var graphArity = map[string][2]int{
	"MatMul": {2, 2}, "Gemm": {2, 3}, "Add": {2, 2}, "Sub": {2, 2}, "Mul": {2, 2}, "Div": {2, 2},
	"Pow": {2, 2}, "Equal": {2, 2}, "Where": {3, 3},
	"Relu": {1, 1}, "Sqrt": {1, 1}, "Erf": {1, 1}, "Tanh": {1, 1}, "Softmax": {1, 1},
	"ReduceMean": {1, 2}, "LayerNormalization": {2, 3},
	"Transpose": {1, 1}, "Reshape": {2, 2}, "Flatten": {1, 1}, "Gather": {2, 2}, "Slice": {3, 5},
	"Split": {1, 2}, "Concat": {1, math.MaxInt}, "Unsqueeze": {1, 2}, "Squeeze": {1, 2},
	"Shape": {1, 1}, "Cast": {1, 1}, "Expand": {2, 2}, "ConstantOfShape": {1, 1},
	"Identity": {1, 1}, "Dropout": {1, 3},
}

// checkArity refuses a node with fewer or more inputs than its operator
// takes, or with a required input left unnamed. Trailing unnamed inputs
// are absent optional ones (ONNX writes them so), not counted.
func checkArity(n *GraphNode) error {
	ar := graphArity[n.Op]
	given := len(n.Inputs)
	for given > 0 && n.Inputs[given-1] == "" {
		given--
	}
	if given < ar[0] || given > ar[1] {
		want := fmt.Sprint(ar[0])
		switch {
		case ar[1] == math.MaxInt:
			want = fmt.Sprintf("at least %d", ar[0])
		case ar[1] > ar[0]:
			want = fmt.Sprintf("%d to %d", ar[0], ar[1])
		}
		return fmt.Errorf("nn: graph node %q (%s) has %d inputs; %s takes %s: %w", n.Name, n.Op, given, n.Op, want, ErrInput)
	}
	for k := 0; k < ar[0]; k++ {
		if n.Inputs[k] == "" {
			return fmt.Errorf("nn: graph node %q (%s): its required input %d has no name: %w", n.Name, n.Op, k, ErrInput)
		}
	}
	return nil
}

// sizeOf returns the number of values of a tensor of this shape, and false
// when a dimension is not positive or the count overflows an int.
func sizeOf(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d <= 0 || n > math.MaxInt/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// value is a tensor flowing through the graph. The graph's input and
// output hold the batch on axis 0; values in between may hold it anywhere
// or (shape arithmetic) not at all.
type value struct {
	shape []int
	data  []float64
	// isInt marks an integer (or boolean) tensor: Div truncates, and the
	// values index and shape other tensors.
	isInt bool
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// In is the number of values of one sample.
func (g *Graph) In() int { return numel(g.InputShape) }

// Out is the number of output values of one sample (after Validate).
func (g *Graph) Out() int {
	if g.outShape == nil && g.Validate() != nil {
		return 0
	}
	return numel(g.outShape)
}

// OutputShape is the shape of one sample's output (after Validate); nil if
// the graph is invalid.
func (g *Graph) OutputShape() []int {
	if g.outShape == nil && g.Validate() != nil {
		return nil
	}
	return slices.Clone(g.outShape)
}

// NumParams counts the values of the floating-point constants.
func (g *Graph) NumParams() int {
	n := 0
	for _, t := range g.Consts {
		if !t.Int {
			n += len(t.Data)
		}
	}
	return n
}

// MultiplyAdds is the multiply-adds per sample of the MatMul and Gemm
// nodes.
func (g *Graph) MultiplyAdds() int {
	if g.outShape == nil && g.Validate() != nil {
		return 0
	}
	return g.madds
}

// Ranks lists the output width of each MatMul or Gemm by a constant
// weight, in node order (a factored weight shows as its two factors).
func (g *Graph) Ranks() []int {
	var out []int
	for _, n := range g.Nodes {
		if (n.Op == "MatMul" || n.Op == "Gemm") && len(n.Inputs) > 1 {
			if w, ok := g.Consts[n.Inputs[1]]; ok && len(w.Shape) == 2 {
				c := w.Shape[1]
				if n.Op == "Gemm" && n.attrInt("transB", 0) != 0 {
					c = w.Shape[0]
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// SampleAxis returns the axis of node i's first input that holds the
// samples, one per position, as Validate observed it: -1 when the value
// does not depend on the samples, or holds them merged with another axis
// (a [T·N, ...] reshape) or on its last axis, or i is out of range.
// InputRows reads the rows of the nodes with a sample axis.
func (g *Graph) SampleAxis(i int) int {
	if g.outShape == nil && g.Validate() != nil || i < 0 || i >= len(g.sampleAxis) {
		return -1
	}
	return g.sampleAxis[i]
}

// Validate checks the graph by running two probe samples through it, alone
// and together: every operator supported, every input defined before use,
// the shapes consistent, the samples on the first axis of the output, and
// no node mixing them (each sample's values the same alone as in a batch;
// no node reducing over them or picking one). Errors name the node. The
// sample's input and each node's output are checked against the memory
// budget (dataio.MemoryBudget) before they are allocated, so a graph that
// declares shapes too large for it gives an error wrapping
// dataio.ErrTooLarge instead of exhausting the machine's memory.
func (g *Graph) Validate() error {
	if _, ok := sizeOf(g.InputShape); !ok || len(g.InputShape) == 0 {
		return fmt.Errorf("nn: graph input %q has shape %v; every dimension of a sample must be known and positive: %w", g.Input, g.InputShape, ErrInput)
	}
	for name, t := range g.Consts {
		if t == nil {
			return fmt.Errorf("nn: graph constant %q is missing: %w", name, ErrInput)
		}
		if size, ok := sizeOf(t.Shape); !ok || size != len(t.Data) {
			return fmt.Errorf("nn: graph constant %q has shape %v and %d values; every dimension must be positive and their product the number of values: %w", name, t.Shape, len(t.Data), ErrInput)
		}
	}
	in := 8.0 // the input's bytes, in float64: numel may overflow
	for _, d := range g.InputShape {
		in *= float64(d)
	}
	if err := dataio.CheckMemory(2*in, fmt.Sprintf("nn: two samples of the graph input %q, shape %v", g.Input, g.InputShape), ""); err != nil {
		return err
	}
	// Two probe samples, u and v, in [-1, 1): alone, then together. The
	// values of all three runs are held for checkSamplesApart, and metered.
	probe := make([]float64, 2*g.In())
	s := uint64(0x9e3779b97f4a7c15)
	for i := range probe {
		s = s*6364136223846793005 + 1442695040888963407
		probe[i] = float64(s>>11)/(1<<52) - 1
	}
	shapes := make([][2][]int, len(g.Nodes))
	var madds int
	used, sample := 2*in, in // all runs; the run of one sample
	runs := make([]map[string]value, 3)
	for r, k := range []int{1, 2, 0} { // k samples: u, then u and v, then v
		x := value{shape: append([]int{max(k, 1)}, g.InputShape...), data: probe[:max(k, 1)*g.In()]}
		if k == 0 {
			x.data = probe[g.In():]
		}
		env, err := g.run(x, func(i int, n *GraphNode, ins []value) error {
			b := 8 * outElems(n, ins)
			used += b
			if k == 1 {
				sample += b
				if n.Op == "MatMul" || n.Op == "Gemm" {
					madds += matMulAdds(n, ins)
				}
			}
			if k > 0 {
				shapes[i][k-1] = slices.Clone(ins[0].shape)
			}
			return dataio.CheckMemory(used, fmt.Sprintf("nn: the probe samples' values up to graph node %q (%s)", n.Name, n.Op), "")
		})
		if err != nil {
			return err
		}
		runs[r] = env
	}
	if err := g.checkSamplesApart(runs); err != nil {
		return err
	}
	out, both := runs[0][g.Output], runs[1][g.Output]
	if len(out.shape) == 0 || out.shape[0] != 1 || len(both.shape) != len(out.shape) || both.shape[0] != 2 || !slices.Equal(both.shape[1:], out.shape[1:]) {
		return fmt.Errorf("nn: the graph output %q has shape %v for one sample and %v for two; it must hold the samples on its first axis: %w", g.Output, out.shape, both.shape, ErrInput)
	}
	g.sampleAxis = make([]int, len(g.Nodes))
	for i, s := range shapes {
		if g.sampleAxis[i] = batchAxis(s[0], s[1]); g.sampleAxis[i] == len(s[0])-1 {
			g.sampleAxis[i] = -1 // the samples are the rows' values
		}
	}
	g.madds = madds
	g.sampleBytes = sample
	g.outShape = out.shape[1:]
	return nil
}

// batchAxis returns the one axis on which a value of shape one (for one
// sample) and two (for two) differ as 1 and 2, or -1.
func batchAxis(one, two []int) int {
	if len(one) != len(two) {
		return -1
	}
	axis := -1
	for k := range one {
		switch {
		case one[k] == two[k]:
		case one[k] == 1 && two[k] == 2 && axis < 0:
			axis = k
		default:
			return -1
		}
	}
	return axis
}

// checkSamplesApart compares the values of the probe runs u, [u v] and v
// node by node: a floating-point value that holds the samples on one axis
// must hold u's and v's own values there, and a node that takes such a
// value must not give a floating-point value that lost the samples (a
// reduction over them or a pick of one).
func (g *Graph) checkSamplesApart(runs []map[string]value) error {
	u, uv, v := runs[0], runs[1], runs[2]
	for i := range g.Nodes {
		n := &g.Nodes[i]
		batched := false
		for _, name := range n.Inputs {
			if a, ok := u[name]; ok && !a.isInt && !slices.Equal(a.shape, uv[name].shape) {
				batched = true
			}
		}
		for _, name := range n.Outputs {
			a, ok := u[name]
			if !ok || a.isInt {
				continue
			}
			b := uv[name]
			if batched && slices.Equal(a.shape, b.shape) {
				return fmt.Errorf("nn: graph node %q (%s) gives %q of shape %v for one sample and for two: it reduces over the samples or picks one, and the samples must stay apart: %w", n.Name, n.Op, name, a.shape, ErrInput)
			}
			k := batchAxis(a.shape, b.shape)
			if k < 0 {
				continue
			}
			if !sameValues(a, b, k, 0) || !sameValues(v[name], b, k, 1) {
				return fmt.Errorf("nn: graph node %q (%s) gives a sample different values in a batch than alone: it mixes the samples, which must stay apart: %w", n.Name, n.Op, ErrInput)
			}
		}
	}
	return nil
}

// sameValues reports whether one (a value for one sample) equals position
// j of axis k of two (the value for two samples), to rounding; NaNs match.
func sameValues(one, two value, k, j int) bool {
	inner := numel(two.shape[k+1:])
	outer := numel(two.shape[:k])
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			x, y := one.data[o*inner+i], two.data[(o*2+j)*inner+i]
			if x != y && !(math.IsNaN(x) && math.IsNaN(y)) && !(math.Abs(x-y) <= 1e-9*(1+math.Abs(x))) {
				return false
			}
		}
	}
	return true
}

// matMulAdds is the multiply-adds of a MatMul or Gemm node on inputs ins.
func matMulAdds(n *GraphNode, ins []value) int {
	a, b := ins[0], ins[1]
	if len(a.shape) == 0 || len(b.shape) == 0 {
		return 0
	}
	k := a.shape[len(a.shape)-1]
	if n.Op == "Gemm" && n.attrInt("transA", 0) != 0 {
		k = a.shape[0]
	}
	if len(b.shape) > 2 {
		return int(outElems(n, ins)) * k
	}
	return numel(a.shape) / max(k, 1) * numel(b.shape)
}

// outElems bounds the values node n allocates for its output from its
// inputs, before it runs: what Validate meters and the batch size of the
// evaluator rests on. Shapes that come from values (Expand,
// ConstantOfShape) count as requested, so a hostile one is metered, not
// allocated.
func outElems(n *GraphNode, ins []value) float64 {
	size := func(s []int) float64 {
		y := 1.0
		for _, d := range s {
			y *= float64(d)
		}
		return y
	}
	a := ins[0]
	switch n.Op {
	case "Identity", "Dropout", "Reshape", "Flatten", "Unsqueeze", "Squeeze":
		return 0 // the output shares the input's values
	case "MatMul", "Gemm":
		b := ins[1]
		if len(a.shape) == 0 || len(b.shape) == 0 {
			return 0 // refused before anything is allocated
		}
		rows := size(a.shape) / float64(max(a.shape[len(a.shape)-1], 1))
		y := rows * float64(b.shape[len(b.shape)-1])
		if len(b.shape) > 1 {
			y = rows * float64(max(b.shape[len(b.shape)-2], b.shape[len(b.shape)-1]))
		}
		if len(b.shape) > 2 {
			y *= size(b.shape[:len(b.shape)-2])
		}
		if n.Op == "Gemm" {
			return 2 * y // the product, then the bias added to it
		}
		return y
	case "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Where", "Expand":
		shapes := make([][]int, 0, len(ins))
		for k, v := range ins {
			if n.Op == "Expand" && k == 1 {
				s := make([]int, len(v.data))
				for i, d := range v.data {
					s[i] = int(max(1, min(d, 1<<40)))
				}
				v.shape = s
			}
			shapes = append(shapes, v.shape)
		}
		// The broadcast shape, or more when the shapes do not broadcast.
		nd := 0
		for _, s := range shapes {
			nd = max(nd, len(s))
		}
		y := 1.0
		for i := 0; i < nd; i++ {
			d := 1
			for _, s := range shapes {
				if j := i - (nd - len(s)); j >= 0 {
					d = max(d, s[j])
				}
			}
			y *= float64(d)
		}
		return y
	case "ConstantOfShape":
		y := 1.0
		for _, d := range a.data {
			y *= max(d, 0)
		}
		return y
	case "Concat":
		y := 0.0
		for _, v := range ins {
			y += size(v.shape)
		}
		return y
	case "Gather":
		return size(a.shape) * max(size(ins[1].shape), 1)
	}
	return size(a.shape) // elementwise, Transpose, Softmax, Slice, Split, Cast; ReduceMean and Shape give fewer
}

// Forward returns the outputs of the samples x (n × In()), one row each
// (n × Out()). It panics on a graph that fails Validate or on x of the
// wrong width.
func (g *Graph) Forward(x *mat.Dense) *mat.Dense {
	if err := g.Validate(); err != nil {
		panic(err)
	}
	n, d := x.Dims()
	if d != g.In() {
		panic(fmt.Sprintf("nn: Graph.Forward: inputs have %d columns, the graph takes %d", d, g.In()))
	}
	z := mat.NewDense(n, g.Out(), nil)
	chunks := (n + evalChunk - 1) / evalChunk
	parallel.For(chunks, func(_, c int) {
		r0, r1 := c*evalChunk, min((c+1)*evalChunk, n)
		g.forwardRows(x.Slice(r0, r1, 0, d).(*mat.Dense), z.Slice(r0, r1, 0, g.Out()).(*mat.Dense))
	})
	return z
}

// batchRows is how many samples one run of the graph takes: at most
// evalChunk, and few enough that the runs of all workers together stay
// within the memory budget (at least one; Validate refuses a graph whose
// one sample does not fit).
func (g *Graph) batchRows() int {
	fit := float64(dataio.MemoryBudget()) / (float64(runtime.GOMAXPROCS(0)) * g.sampleBytes)
	return int(max(1, min(evalChunk, fit)))
}

// forwardRows writes the outputs of the samples xs into z, batchRows
// samples at a time.
func (g *Graph) forwardRows(xs, z *mat.Dense) {
	n, d := xs.Dims()
	_, c := z.Dims()
	step := g.batchRows()
	for r0 := 0; r0 < n; r0 += step {
		r1 := min(r0+step, n)
		env, err := g.run(g.batch(xs.Slice(r0, r1, 0, d).(*mat.Dense)), nil)
		if err != nil {
			panic(err)
		}
		out := env[g.Output]
		if len(out.data) != (r1-r0)*c {
			panic(fmt.Sprintf("nn: graph output %q has shape %v for %d samples; Validate saw %v per sample", g.Output, out.shape, r1-r0, g.outShape))
		}
		for i := r0; i < r1; i++ {
			copy(z.RawRowView(i), out.data[(i-r0)*c:(i-r0+1)*c])
		}
	}
}

// batch copies the rows of xs into a value of shape [n, InputShape...].
func (g *Graph) batch(xs *mat.Dense) value {
	n, d := xs.Dims()
	v := value{shape: append([]int{n}, g.InputShape...), data: make([]float64, n*d)}
	for i := 0; i < n; i++ {
		copy(v.data[i*d:], xs.RawRowView(i))
	}
	return v
}

// Evaluate returns the mean softmax cross-entropy and the accuracy of the
// outputs against labels, like MLP.Evaluate.
func (g *Graph) Evaluate(x *mat.Dense, labels []int) (Metrics, error) {
	if err := g.Validate(); err != nil {
		return Metrics{}, err
	}
	return evaluateChunks(x, labels, g.In(), g.Out(), g.forwardRows)
}

// InputRows pushes the samples x through the graph and returns, for each
// index in nodes (nodes whose first input holds the samples on an axis
// other than its last, SampleAxis), the rows of that node's first input:
// the sample axis moved first, then every axis but the last flattened, so
// a MatMul on [N, 28, 64] gives 28·N rows of 64 values, sample by sample.
// pick(j, total) chooses which of the total rows of nodes[j] to keep
// (ascending indices; nil keeps all); it is called once per node. The
// samples go through in chunks, so only the kept rows are stored.
func (g *Graph) InputRows(x *mat.Dense, nodes []int, pick func(j, total int) []int) ([]*mat.Dense, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n, d := x.Dims()
	if d != g.In() {
		return nil, fmt.Errorf("nn: graph inputs have %d columns, the graph takes %d: %w", d, g.In(), ErrInput)
	}
	which := map[int]int{}
	last := -1 // the run stops there: later nodes are not needed
	for j, i := range nodes {
		last = max(last, i)
		if g.SampleAxis(i) < 0 {
			return nil, fmt.Errorf("nn: graph node %d: its first input does not hold the samples on an axis of their own before the last, so its rows are not one sample's: %w", i, ErrInput)
		}
		which[i] = j
	}
	out := make([]*mat.Dense, len(nodes))
	rows := make([][]int, len(nodes))
	step := g.batchRows()
	for r0 := 0; r0 < n; r0 += step {
		r1 := min(r0+step, n)
		_, err := g.run(g.batch(x.Slice(r0, r1, 0, d).(*mat.Dense)), func(i int, _ *GraphNode, ins []value) (err error) {
			j, ok := which[i]
			if !ok {
				return nil
			}
			if i == last {
				defer func() {
					if err == nil {
						err = errStopRun
					}
				}()
			}
			a, err := samplesFirst(ins[0], g.sampleAxis[i])
			if err != nil {
				return err
			}
			k := a.shape[len(a.shape)-1]
			per := numel(a.shape) / k / (r1 - r0)
			if out[j] == nil {
				rows[j] = pick(j, n*per)
				m := n * per
				if rows[j] != nil {
					m = len(rows[j])
				}
				out[j] = mat.NewDense(max(m, 1), k, nil)
			}
			copyRows(out[j], a, k, r0*per, r1*per, rows[j])
			return nil
		})
		if err != nil && err != errStopRun {
			return nil, err
		}
	}
	return out, nil
}

// errStopRun is what a probe returns to end a run early, its values seen;
// it never leaves the package.
var errStopRun = errs.New("nn: run stopped by its probe", nil)

// seq returns 0, 1, …, n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// GraphValues are the values of one run of a graph on a batch of samples,
// by name: what ForwardFrom resumes from.
type GraphValues struct {
	env     map[string]value
	samples int
}

// Values runs the graph on the samples x in one batch, which must fit the
// memory budget, and returns all its values.
func (g *Graph) Values(x *mat.Dense) (*GraphValues, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n, d := x.Dims()
	if d != g.In() {
		return nil, fmt.Errorf("nn: graph inputs have %d columns, the graph takes %d: %w", d, g.In(), ErrInput)
	}
	if err := dataio.CheckMemory(float64(n)*g.sampleBytes, fmt.Sprintf("nn: the values of %d samples of the graph", n), ""); err != nil {
		return nil, err
	}
	env, err := g.run(g.batch(x), nil)
	if err != nil {
		return nil, err
	}
	return &GraphValues{env: env, samples: n}, nil
}

// ForwardFrom returns the outputs (one row per sample) of g on the samples
// of vals, computed by g's nodes from index from on; the values of the
// earlier nodes are vals', which a graph whose first from nodes are g's
// computed (a graph rewritten from that node on), so they are not
// recomputed.
func (g *Graph) ForwardFrom(vals *GraphValues, from int) (*mat.Dense, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	env := make(map[string]value, len(vals.env))
	for k, v := range vals.env {
		env[k] = v
	}
	env, err := g.runFrom(env, from, nil)
	if err != nil {
		return nil, err
	}
	out := env[g.Output]
	if len(out.data) != vals.samples*g.Out() {
		return nil, fmt.Errorf("nn: graph output %q has shape %v for %d samples: %w", g.Output, out.shape, vals.samples, ErrInput)
	}
	return mat.NewDense(vals.samples, g.Out(), out.data), nil
}

// run evaluates the graph on x and returns every value it computed by
// name; probe, if not nil, sees each node's inputs before it runs, and an
// error it returns stops the run.
func (g *Graph) run(x value, probe func(i int, n *GraphNode, ins []value) error) (map[string]value, error) {
	return g.runFrom(map[string]value{g.Input: x}, 0, probe)
}

// runFrom is run from node from on, the values in env known.
func (g *Graph) runFrom(env map[string]value, from int, probe func(i int, n *GraphNode, ins []value) error) (map[string]value, error) {
	for i := from; i < len(g.Nodes); i++ {
		n := &g.Nodes[i]
		if !slices.Contains(graphOps, n.Op) {
			return nil, fmt.Errorf("nn: graph node %q: unsupported operator %s; supported: %v: %w", n.Name, n.Op, graphOps, ErrInput)
		}
		if len(n.Outputs) == 0 {
			return nil, fmt.Errorf("nn: graph node %q (%s) has no output: %w", n.Name, n.Op, ErrInput)
		}
		if err := checkArity(n); err != nil {
			return nil, err
		}
		ins, err := g.inputs(n, env)
		if err != nil {
			return nil, err
		}
		if probe != nil {
			if err := probe(i, n, ins); err != nil {
				return nil, err
			}
		}
		ys, err := g.apply(n, ins)
		if err != nil {
			return nil, fmt.Errorf("nn: graph node %q (%s): %v: %w", n.Name, n.Op, err, ErrInput)
		}
		for k, y := range ys {
			if k < len(n.Outputs) && n.Outputs[k] != "" {
				env[n.Outputs[k]] = y
			}
		}
	}
	if _, ok := env[g.Output]; !ok {
		return nil, fmt.Errorf("nn: the graph output %q is computed by no node: %w", g.Output, ErrInput)
	}
	return env, nil
}

// inputs returns the values of node n's inputs: computed ones from env,
// constants from g.Consts, an absent optional input as the zero value.
func (g *Graph) inputs(n *GraphNode, env map[string]value) ([]value, error) {
	ins := make([]value, len(n.Inputs))
	for k, name := range n.Inputs {
		if name == "" {
			continue
		}
		if v, ok := env[name]; ok {
			ins[k] = v
		} else if t, ok := g.Consts[name]; ok {
			ins[k] = value{shape: t.Shape, data: t.Data, isInt: t.Int}
		} else {
			return nil, fmt.Errorf("nn: graph node %q (%s): input %q is not computed before it (nodes must be in topological order): %w", n.Name, n.Op, name, ErrInput)
		}
	}
	return ins, nil
}

func (n *GraphNode) attrInt(name string, def int64) int64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == "int" {
		return a.I
	}
	return def
}

func (n *GraphNode) attrFloat(name string, def float64) float64 {
	if a, ok := n.Attrs[name]; ok && a.Kind == "float" {
		return a.F
	}
	return def
}

// String summarises the graph: one sample's input shape and the count of
// each operator, as "graph [28 28]: 9 MatMul, 9 Add, ...".
func (g *Graph) String() string {
	count := map[string]int{}
	var order []string
	for _, n := range g.Nodes {
		if count[n.Op] == 0 {
			order = append(order, n.Op)
		}
		count[n.Op]++
	}
	s := fmt.Sprintf("graph %v:", g.InputShape)
	for i, op := range order {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %d %s", count[op], op)
	}
	return s
}
