package nn

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/parallel"
)

// Graph is a feed-forward ONNX computation graph evaluated on a batch:
// residual and mixer-style networks whose values are tensors with the
// samples on the first axis (an image as 28 tokens × 28 channels is one
// [28, 28] sample). Nodes run in their order, which must be topological
// (torch.onnx.export writes them so); weights are constant tensors. The
// operators are MatMul (by a 2-D right factor), Gemm, Add, Sub, Mul, Div
// (numpy broadcasting), Relu, Transpose, Reshape, Flatten, ReduceMean,
// Softmax, Identity and Dropout; no operator may mix samples (move, reduce
// or reshape the batch axis). Each row of the Forward input is one sample
// flattened row-major to In() values.
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

	// Filled by Validate: one sample's output shape, the multiply-adds
	// of the MatMul and Gemm nodes per sample, and the bytes one sample's
	// evaluation allocates (its input and every node's output).
	outShape    []int
	madds       int
	sampleBytes float64
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

// GraphAttr is an integer, float or integer-list attribute of a node.
type GraphAttr struct {
	Kind string // "int", "float" or "ints"
	I    int64
	F    float64
	Ints []int64
}

// graphOps are the supported operators.
var graphOps = []string{"MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Transpose", "Reshape", "Flatten", "ReduceMean", "Softmax", "Identity", "Dropout"}

// graphArity is the number of inputs each operator takes: at least [0]
// (required, named), at most [1] (the rest optional: Gemm's bias C,
// Dropout's ratio and training mode).
var graphArity = map[string][2]int{
	"MatMul": {2, 2}, "Gemm": {2, 3}, "Add": {2, 2}, "Sub": {2, 2}, "Mul": {2, 2}, "Div": {2, 2},
	"Relu": {1, 1}, "Transpose": {1, 1}, "Reshape": {2, 2}, "Flatten": {1, 1}, "ReduceMean": {1, 1},
	"Softmax": {1, 1}, "Identity": {1, 1}, "Dropout": {1, 3},
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
		if ar[1] > ar[0] {
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

// value is a tensor flowing through the graph; shape[0] is the batch.
type value struct {
	shape []int
	data  []float64
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

// Validate checks the graph by running one zero sample through it: every
// operator supported, every input defined before use, the shapes
// consistent, the batch axis left in place. Errors name the node. The
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
	used := 8.0 // the input's bytes, in float64: numel may overflow
	for _, d := range g.InputShape {
		used *= float64(d)
	}
	if err := dataio.CheckMemory(used, fmt.Sprintf("nn: one sample of the graph input %q, shape %v", g.Input, g.InputShape), ""); err != nil {
		return err
	}
	g.madds = 0
	out, err := g.run(value{shape: append([]int{1}, g.InputShape...), data: make([]float64, g.In())}, func(i int, n *GraphNode, a, b value) error {
		if n.Op == "MatMul" || n.Op == "Gemm" {
			k := a.shape[len(a.shape)-1]
			if n.Op == "Gemm" && n.attrInt("transA", 0) != 0 {
				k = a.shape[0]
			}
			g.madds += numel(a.shape) / k * numel(b.shape)
		}
		used += 8 * outElems(n, a, b)
		return dataio.CheckMemory(used, fmt.Sprintf("nn: one sample's values up to graph node %q (%s)", n.Name, n.Op), "")
	})
	if err != nil {
		return err
	}
	g.outShape = out.shape[1:]
	g.sampleBytes = used
	return nil
}

// outElems bounds the values node n allocates for its output, from its
// first two inputs, before it runs: what Validate meters and the batch
// size of the evaluator rests on.
func outElems(n *GraphNode, a, b value) float64 {
	switch n.Op {
	case "Identity", "Dropout", "Reshape", "Flatten":
		return 0 // the output shares the input's values
	case "MatMul", "Gemm":
		if len(a.shape) == 0 || len(b.shape) != 2 {
			return 0 // refused before anything is allocated
		}
		rows := float64(numel(a.shape)) / float64(max(a.shape[len(a.shape)-1], 1))
		y := rows * float64(max(b.shape[0], b.shape[1]))
		if n.Op == "Gemm" {
			return 2 * y // the product, then the bias added to it
		}
		return y
	case "Add", "Sub", "Mul", "Div":
		// The broadcast shape, or more when the shapes do not broadcast.
		as, bs := a.shape, b.shape
		if len(as) < len(bs) {
			as, bs = bs, as
		}
		y := 1.0
		for i, d := range as {
			if j := i - (len(as) - len(bs)); j >= 0 {
				d = max(d, bs[j])
			}
			y *= float64(d)
		}
		return y
	}
	return float64(numel(a.shape)) // Relu, Transpose, Softmax; ReduceMean gives fewer
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
		out, err := g.run(g.batch(xs.Slice(r0, r1, 0, d).(*mat.Dense)), nil)
		if err != nil {
			panic(err)
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
// index in nodes (nodes with a first input of two or more axes), the rows
// of that node's first input: every axis but the last flattened, so a
// MatMul on [N, 28, 64] gives 28·N rows of 64 values, sample by sample.
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
	for j, i := range nodes {
		which[i] = j
	}
	out := make([]*mat.Dense, len(nodes))
	rows := make([][]int, len(nodes))
	next := make([]int, len(nodes)) // next position in rows[j]
	filled := make([]int, len(nodes))
	step := g.batchRows()
	for r0 := 0; r0 < n; r0 += step {
		r1 := min(r0+step, n)
		_, err := g.run(g.batch(x.Slice(r0, r1, 0, d).(*mat.Dense)), func(i int, _ *GraphNode, a, _ value) error {
			j, ok := which[i]
			if !ok {
				return nil
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
			base := r0 * per
			if rows[j] == nil {
				copy(out[j].RawMatrix().Data[base*k:], a.data)
				return nil
			}
			for ; next[j] < len(rows[j]) && rows[j][next[j]] < r1*per; next[j]++ {
				copy(out[j].RawRowView(filled[j]), a.data[(rows[j][next[j]]-base)*k:][:k])
				filled[j]++
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run evaluates the graph on x; probe, if not nil, sees each node's first
// two inputs before it runs, and an error it returns stops the run.
func (g *Graph) run(x value, probe func(i int, n *GraphNode, a, b value) error) (value, error) {
	env := map[string]value{g.Input: x}
	get := func(n *GraphNode, k int) (value, bool, error) {
		if k >= len(n.Inputs) || n.Inputs[k] == "" {
			return value{}, false, nil
		}
		if v, ok := env[n.Inputs[k]]; ok {
			return v, false, nil
		}
		if t, ok := g.Consts[n.Inputs[k]]; ok {
			return value{shape: t.Shape, data: t.Data}, true, nil
		}
		return value{}, false, fmt.Errorf("nn: graph node %q (%s): input %q is not computed before it (nodes must be in topological order): %w", n.Name, n.Op, n.Inputs[k], ErrInput)
	}
	batch := x.shape[0]
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if !slices.Contains(graphOps, n.Op) {
			return value{}, fmt.Errorf("nn: graph node %q: unsupported operator %s; supported: %v: %w", n.Name, n.Op, graphOps, ErrInput)
		}
		if len(n.Outputs) == 0 {
			return value{}, fmt.Errorf("nn: graph node %q (%s) has no output: %w", n.Name, n.Op, ErrInput)
		}
		if err := checkArity(n); err != nil {
			return value{}, err
		}
		a, aConst, err := get(n, 0)
		if err != nil {
			return value{}, err
		}
		b, _, err := get(n, 1)
		if err != nil {
			return value{}, err
		}
		if aConst && n.Op != "Add" && n.Op != "Mul" && n.Op != "Sub" && n.Op != "Div" {
			return value{}, fmt.Errorf("nn: graph node %q (%s): its data input %q is a constant: %w", n.Name, n.Op, n.Inputs[0], ErrInput)
		}
		if probe != nil {
			if err := probe(i, n, a, b); err != nil {
				return value{}, err
			}
		}
		y, err := g.apply(n, a, b)
		if err != nil {
			return value{}, fmt.Errorf("nn: graph node %q (%s): %v: %w", n.Name, n.Op, err, ErrInput)
		}
		if len(y.shape) == 0 || y.shape[0] != batch {
			return value{}, fmt.Errorf("nn: graph node %q (%s) gives shape %v, which does not keep the %d samples on the first axis: %w", n.Name, n.Op, y.shape, batch, ErrInput)
		}
		env[n.Outputs[0]] = y
	}
	y, ok := env[g.Output]
	if !ok {
		return value{}, fmt.Errorf("nn: the graph output %q is computed by no node: %w", g.Output, ErrInput)
	}
	return y, nil
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

// apply computes node n on its first inputs a and b.
func (g *Graph) apply(n *GraphNode, a, b value) (value, error) {
	switch n.Op {
	case "Identity", "Dropout":
		return a, nil
	case "Relu":
		y := value{shape: a.shape, data: make([]float64, len(a.data))}
		for i, v := range a.data {
			y.data[i] = math.Max(v, 0)
		}
		return y, nil
	case "MatMul":
		if len(b.shape) != 2 || len(a.shape) < 2 || a.shape[len(a.shape)-1] != b.shape[0] {
			return value{}, fmt.Errorf("shapes %v × %v: only a product by a 2-D right factor is supported", a.shape, b.shape)
		}
		return matmulRows(a, b.data, b.shape[0], b.shape[1], false, 1), nil
	case "Gemm":
		return g.gemm(n, a, b)
	case "Add", "Sub", "Mul", "Div":
		return broadcast(n.Op, a, b)
	case "Transpose":
		perm := make([]int, len(a.shape))
		for i := range perm {
			perm[i] = len(perm) - 1 - i
		}
		if at, ok := n.Attrs["perm"]; ok {
			if len(at.Ints) != len(a.shape) {
				return value{}, fmt.Errorf("perm %v for a tensor of shape %v", at.Ints, a.shape)
			}
			for i, p := range at.Ints {
				perm[i] = int(p)
			}
		}
		return transpose(a, perm)
	case "Reshape":
		t, ok := g.Consts[n.Inputs[1]]
		if !ok {
			return value{}, fmt.Errorf("the shape must be a constant")
		}
		return reshape(a, t.Data)
	case "Flatten":
		ax := n.attrInt("axis", 1)
		if ax < 0 {
			ax += int64(len(a.shape))
		}
		if ax < 1 || ax > int64(len(a.shape)) {
			return value{}, fmt.Errorf("axis %d: only axes ≥ 1 keep the samples as rows", n.attrInt("axis", 1))
		}
		return value{shape: []int{numel(a.shape[:ax]), numel(a.shape[ax:])}, data: a.data}, nil
	case "ReduceMean":
		at, ok := n.Attrs["axes"]
		if !ok {
			return value{}, fmt.Errorf("no axes: reducing over all axes would mix the samples")
		}
		return reduceMean(a, at.Ints, n.attrInt("keepdims", 1) != 0)
	case "Softmax":
		return softmax(a, int(n.attrInt("axis", -1)))
	}
	return value{}, fmt.Errorf("unsupported operator")
}

// gemm is alpha·op(A)·op(B) + beta·C with A 2-D.
func (g *Graph) gemm(n *GraphNode, a, b value) (value, error) {
	if len(a.shape) != 2 || len(b.shape) != 2 || n.attrInt("transA", 0) != 0 {
		return value{}, fmt.Errorf("shapes %v × %v (transA %d): Gemm needs 2-D inputs and transA 0", a.shape, b.shape, n.attrInt("transA", 0))
	}
	tb := n.attrInt("transB", 0) != 0
	k, m := b.shape[0], b.shape[1]
	if tb {
		k, m = m, k
	}
	if a.shape[1] != k {
		return value{}, fmt.Errorf("shapes %v × %v (transB %v) do not match", a.shape, b.shape, tb)
	}
	y := matmulRows(a, b.data, b.shape[0], b.shape[1], tb, n.attrFloat("alpha", 1))
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		c, ok := g.Consts[n.Inputs[2]]
		if !ok {
			return value{}, fmt.Errorf("the bias C must be a constant")
		}
		cv := value{shape: c.Shape, data: c.Data}
		if beta := n.attrFloat("beta", 1); beta != 1 {
			cv.data = slices.Clone(c.Data)
			for i := range cv.data {
				cv.data[i] *= beta
			}
		}
		return broadcast("Add", y, cv)
	}
	return y, nil
}

// matmulRows multiplies the rows of a (all axes but the last flattened) by
// the r×c matrix w (its transpose if tw), times alpha.
func matmulRows(a value, w []float64, r, c int, tw bool, alpha float64) value {
	k := a.shape[len(a.shape)-1]
	rows := len(a.data) / max(k, 1)
	wm := mat.NewDense(r, c, w)
	outC := c
	var wt mat.Matrix = wm
	if tw {
		outC, wt = r, wm.T()
	}
	y := value{shape: append(slices.Clone(a.shape[:len(a.shape)-1]), outC), data: make([]float64, rows*outC)}
	if rows == 0 || k == 0 {
		return y
	}
	ym := mat.NewDense(rows, outC, y.data)
	ym.Mul(mat.NewDense(rows, k, a.data), wt)
	if alpha != 1 {
		ym.Scale(alpha, ym)
	}
	return y
}

// broadcast applies an elementwise binary operator with numpy
// broadcasting.
func broadcast(op string, a, b value) (value, error) {
	nd := max(len(a.shape), len(b.shape))
	pad := func(s []int) []int { return append(slices.Repeat([]int{1}, nd-len(s)), s...) }
	as, bs := pad(a.shape), pad(b.shape)
	shape := make([]int, nd)
	for i := range shape {
		switch {
		case as[i] == bs[i] || bs[i] == 1:
			shape[i] = as[i]
		case as[i] == 1:
			shape[i] = bs[i]
		default:
			return value{}, fmt.Errorf("shapes %v and %v do not broadcast", a.shape, b.shape)
		}
	}
	f := map[string]func(x, y float64) float64{
		"Add": func(x, y float64) float64 { return x + y },
		"Sub": func(x, y float64) float64 { return x - y },
		"Mul": func(x, y float64) float64 { return x * y },
		"Div": func(x, y float64) float64 { return x / y },
	}[op]
	y := value{shape: shape, data: make([]float64, numel(shape))}
	// Fast path: b repeats over the leading axes of a (a bias), or a over b's.
	if slices.Equal(shape, as) && len(b.data) > 0 && suffixOf(bs, as) {
		m := len(b.data)
		for i, v := range a.data {
			y.data[i] = f(v, b.data[i%m])
		}
		return y, nil
	}
	if slices.Equal(shape, bs) && len(a.data) > 0 && suffixOf(as, bs) {
		m := len(a.data)
		for i, v := range b.data {
			y.data[i] = f(a.data[i%m], v)
		}
		return y, nil
	}
	sa, sb := bstrides(as, shape), bstrides(bs, shape)
	idx := make([]int, nd)
	for i := range y.data {
		ia, ib := 0, 0
		for k := 0; k < nd; k++ {
			ia += idx[k] * sa[k]
			ib += idx[k] * sb[k]
		}
		y.data[i] = f(a.data[ia], b.data[ib])
		for k := nd - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	return y, nil
}

// suffixOf reports whether s (padded to full's rank) is ones followed by
// the trailing axes of full, so its values repeat with period len(s).
func suffixOf(s, full []int) bool {
	i := 0
	for i < len(s) && s[i] == 1 {
		i++
	}
	return slices.Equal(s[i:], full[i:])
}

// bstrides returns the row-major strides of shape s, 0 on broadcast axes.
func bstrides(s, out []int) []int {
	st := make([]int, len(s))
	acc := 1
	for k := len(s) - 1; k >= 0; k-- {
		if s[k] != 1 || out[k] == 1 {
			st[k] = acc
		}
		if s[k] == 1 {
			st[k] = 0
		}
		acc *= s[k]
	}
	return st
}

// transpose permutes the axes of a.
func transpose(a value, perm []int) (value, error) {
	nd := len(a.shape)
	seen := make([]bool, nd)
	for _, p := range perm {
		if p < 0 || p >= nd || seen[p] {
			return value{}, fmt.Errorf("perm %v is not a permutation of %d axes", perm, nd)
		}
		seen[p] = true
	}
	shape := make([]int, nd)
	in := bstrides(a.shape, a.shape)
	st := make([]int, nd)
	for i, p := range perm {
		shape[i] = a.shape[p]
		st[i] = in[p]
		if a.shape[p] == 1 {
			st[i] = 0
		}
	}
	y := value{shape: shape, data: make([]float64, len(a.data))}
	idx := make([]int, nd)
	off := 0
	for i := range y.data {
		y.data[i] = a.data[off]
		for k := nd - 1; k >= 0; k-- {
			idx[k]++
			off += st[k]
			if idx[k] < shape[k] {
				break
			}
			off -= st[k] * idx[k]
			idx[k] = 0
		}
	}
	return y, nil
}

// reshape applies an ONNX Reshape shape (0 copies the input's dimension,
// -1 is inferred).
func reshape(a value, spec []float64) (value, error) {
	shape := make([]int, len(spec))
	infer := -1
	known := 1
	for i, s := range spec {
		switch d := int(s); {
		case d == 0 && i < len(a.shape):
			shape[i] = a.shape[i]
		case d == -1 && infer < 0:
			infer = i
			continue
		case d > 0:
			shape[i] = d
		default:
			return value{}, fmt.Errorf("shape %v is not supported", spec)
		}
		known *= shape[i]
	}
	if infer >= 0 {
		if known <= 0 || len(a.data)%known != 0 {
			return value{}, fmt.Errorf("cannot reshape %v to %v", a.shape, spec)
		}
		shape[infer] = len(a.data) / known
	}
	if size, ok := sizeOf(shape); !ok || size != len(a.data) {
		return value{}, fmt.Errorf("cannot reshape %v to %v", a.shape, spec)
	}
	return value{shape: shape, data: a.data}, nil
}

// reduceMean averages over axes (never the batch axis 0).
func reduceMean(a value, axes []int64, keep bool) (value, error) {
	nd := len(a.shape)
	red := make([]bool, nd)
	for _, ax := range axes {
		if ax < 0 {
			ax += int64(nd)
		}
		if ax < 1 || ax >= int64(nd) {
			return value{}, fmt.Errorf("axes %v on shape %v: only axes ≥ 1 keep the samples apart", axes, a.shape)
		}
		red[ax] = true
	}
	var shape, full []int
	count := 1
	for k, d := range a.shape {
		if red[k] {
			count *= d
			full = append(full, 1)
			if keep {
				shape = append(shape, 1)
			}
			continue
		}
		full = append(full, d)
		shape = append(shape, d)
	}
	y := value{shape: shape, data: make([]float64, numel(shape))}
	st := bstrides(full, a.shape)
	idx := make([]int, nd)
	for _, v := range a.data {
		o := 0
		for k := 0; k < nd; k++ {
			o += idx[k] * st[k]
		}
		y.data[o] += v
		for k := nd - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < a.shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	for i := range y.data {
		y.data[i] /= float64(count)
	}
	return y, nil
}

// softmax normalises over the last axis (axis must name it).
func softmax(a value, axis int) (value, error) {
	nd := len(a.shape)
	if axis < 0 {
		axis += nd
	}
	if axis != nd-1 || axis < 1 {
		return value{}, fmt.Errorf("axis %d: only the last axis (not the batch) is supported", axis)
	}
	k := a.shape[nd-1]
	y := value{shape: a.shape, data: make([]float64, len(a.data))}
	for r := 0; r+k <= len(a.data); r += k {
		row, out := a.data[r:r+k], y.data[r:r+k]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		var s float64
		for i, v := range row {
			out[i] = math.Exp(v - m)
			s += out[i]
		}
		for i := range out {
			out[i] /= s
		}
	}
	return y, nil
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
