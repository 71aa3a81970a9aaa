package modelfile

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// onnxGraph is what readGraph reads from a GraphProto: the weights
// (initializers and Constant nodes), the nodes in file order, the names of
// the graph's inputs and outputs, and the inputs' shapes.
type onnxGraph struct {
	inits           map[string]*onnxTensor
	nodes           []onnxNode
	inputs, outputs []string
	// inputDims is the declared shape of each input; -1 marks a symbolic
	// or unknown dimension, nil an input without a declared shape.
	inputDims map[string][]int
	// opset is the model's default-domain operator set (0: not given).
	opset int
}

// mlpFromGraph assembles the MLP the chain of nodes of g computes from its
// one data input to its one output.
func mlpFromGraph(g *onnxGraph) (*nn.MLP, error) {
	in, err := g.dataInput()
	if err != nil {
		return nil, err
	}
	c := &chainBuilder{inits: g.inits, m: &nn.MLP{}, cur: in}
	for _, n := range g.nodes {
		if err := c.step(n); err != nil {
			return nil, err
		}
	}
	c.flush()
	if c.afterExp {
		return nil, onnxErrf("an Exp node after a Relu must be followed by Sub 1 (the rectified exponential e^{max(x,0)} − 1); other uses of Exp are not supported")
	}
	if c.cur != g.outputs[0] {
		return nil, onnxErrf("the chain of nodes ends at %q but the graph output is %q", c.cur, g.outputs[0])
	}
	if len(c.m.Layers) == 0 {
		return nil, onnxErrf("no Linear layer found")
	}
	if err := c.m.Validate(); err != nil {
		return nil, onnxErrf("%v", err)
	}
	return c.m, nil
}

// readGraph decodes the fields of a GraphProto that an MLP needs.
func readGraph(b []byte) (*onnxGraph, error) {
	fields, err := pbFields(b)
	if err != nil {
		return nil, onnxErrf("graph: %v", err)
	}
	g := &onnxGraph{inits: map[string]*onnxTensor{}, inputDims: map[string][]int{}}
	for _, f := range fields {
		switch f.num {
		case graphInitializer:
			t, err := parseTensor(f.b)
			if err != nil {
				return nil, err
			}
			g.inits[t.name] = t
		case graphNode:
			n, err := parseNode(f.b)
			if err != nil {
				return nil, err
			}
			g.nodes = append(g.nodes, n)
		case graphInput, graphOutput:
			name, dims, err := valueInfoOf(f)
			if err != nil {
				return nil, err
			}
			if f.num == graphInput {
				g.inputs = append(g.inputs, name)
				g.inputDims[name] = dims
			} else {
				g.outputs = append(g.outputs, name)
			}
		}
	}
	return g, nil
}

// valueInfoOf returns the name and the declared shape of a graph input or
// output (a ValueInfoProto): one entry per dimension, -1 where it is
// symbolic ("N") or unknown; nil when no tensor shape is declared.
func valueInfoOf(f pbField) (string, []int, error) {
	if f.wire != wireBytes {
		return "", nil, onnxErrf("graph input/output is not a message")
	}
	vf, err := pbFields(f.b)
	if err != nil {
		return "", nil, onnxErrf("graph input/output: %v", err)
	}
	name := ""
	var dims []int
	for _, v := range vf {
		switch v.num {
		case valueInfoName:
			if name, err = v.str(); err != nil {
				return "", nil, onnxErrf("graph input/output name: %v", err)
			}
		case valueInfoType:
			// TypeProto.tensor_type.shape.dim[].dim_value
			shape := pbSub(pbSub(v.b, typeTensorType), tensorShape)
			for _, d := range pbAll(shape, shapeDim) {
				val := -1
				for _, x := range pbAll(d.b, dimValue) {
					if n, ok := x.int(); ok && n > 0 && n <= math.MaxInt32 {
						val = int(n)
					}
				}
				dims = append(dims, val)
			}
		}
	}
	return name, dims, nil
}

// pbSub returns the bytes of the last message field num in msg (nil if
// there is none or msg does not parse): a lenient walk for optional
// metadata such as shapes, where a malformed part only loses the shape.
func pbSub(msg []byte, num int) []byte {
	var out []byte
	for _, f := range pbAll(msg, num) {
		if f.wire == wireBytes {
			out = f.b
		}
	}
	return out
}

// pbAll returns the fields numbered num of msg (none if it does not parse).
func pbAll(msg []byte, num int) []pbField {
	fields, err := pbFields(msg)
	if err != nil {
		return nil
	}
	var out []pbField
	for _, f := range fields {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

// int returns a varint field's value.
func (f pbField) int() (int64, bool) { return int64(f.v), f.wire == wireVarint }

// convNode returns the first node only a convolutional network has (Conv
// or MaxPool).
func (g *onnxGraph) convNode() (onnxNode, bool) {
	for _, n := range g.nodes {
		if n.op == "Conv" || n.op == "MaxPool" {
			return n, true
		}
	}
	return onnxNode{}, false
}

// addConstants adds the Constant nodes, which are initializers written as
// nodes, to the weights.
func (g *onnxGraph) addConstants() {
	for _, n := range g.nodes {
		if n.op == "Constant" && len(n.outs) == 1 {
			if a, ok := n.attrs["value"]; ok && a.t != nil {
				t := *a.t
				t.name = n.outs[0]
				g.inits[t.name] = &t
			}
		}
	}
}

// dataInput returns the graph's one input that is not a weight, after
// checking that there is exactly one such input and exactly one output.
func (g *onnxGraph) dataInput() (string, error) {
	var data []string
	for _, in := range g.inputs {
		if _, isInit := g.inits[in]; !isInit {
			data = append(data, in)
		}
	}
	if len(data) != 1 {
		return "", onnxErrf("the graph has %d data inputs %v; expected exactly one (the MLP's input)", len(data), data)
	}
	if len(g.outputs) != 1 {
		return "", onnxErrf("the graph has %d outputs; expected exactly one", len(g.outputs))
	}
	return data[0], nil
}

// chainBuilder walks the nodes from the data input and assembles layers.
type chainBuilder struct {
	inits map[string]*onnxTensor
	m     *nn.MLP
	pend  *nn.Layer // the layer being assembled (weight seen, activation not yet)
	cur   string    // the name of the running value
	// afterExp is set between the Exp and the Sub of a rectified
	// exponential (Relu, Exp, Sub 1), which WriteONNX writes for reluexp.
	afterExp bool
}

// flush appends the pending layer, if any, to the model.
func (c *chainBuilder) flush() {
	if c.pend != nil {
		c.m.Layers = append(c.m.Layers, *c.pend)
		c.pend = nil
	}
}

// weightOf returns the weight that is input i of n.
func (c *chainBuilder) weightOf(n onnxNode, i int) (*onnxTensor, error) {
	if i >= len(n.inputs) {
		return nil, onnxErrf("node %q (%s) lacks input %d", n.name, n.op, i)
	}
	t, ok := c.inits[n.inputs[i]]
	if !ok {
		return nil, onnxErrf("node %q (%s): input %q is computed, not a weight; only chains of Linear/ReLU layers are supported", n.name, n.op, n.inputs[i])
	}
	return t, nil
}

// step applies one node: it must take the running value, and its first
// output becomes the running value. Constant nodes are skipped (they are
// weights).
func (c *chainBuilder) step(n onnxNode) error {
	if n.op == "Constant" {
		return nil
	}
	if err := checkChained(n, c.cur); err != nil {
		return err
	}
	var err error
	switch n.op {
	case "Gemm":
		err = c.gemm(n)
	case "MatMul":
		err = c.matMul(n)
	case "Add":
		err = c.add(n)
	case "Relu":
		err = c.relu(n)
	case "Pow", "Exp", "Sub":
		err = c.rectified(n)
	case "Identity", "Dropout":
	case "Flatten":
		if a, ok := n.attrs["axis"]; ok && a.hasI && a.i != 1 {
			err = onnxErrf("Flatten %q with axis %d; only axis 1 keeps samples as rows", n.name, a.i)
		}
	default:
		err = onnxErrf("unsupported operator %s (node %q); supported: Gemm, MatMul, Add, Relu, Identity, Flatten, Dropout, Constant, and Pow, Exp, Sub after a Relu (WriteONNX's relupow and reluexp)", n.op, n.name)
	}
	if err != nil {
		return err
	}
	c.cur = n.outs[0]
	return nil
}

// checkChained checks that node n has an output and takes the running
// value cur, as every node of a sequential model does.
func checkChained(n onnxNode, cur string) error {
	if len(n.outs) == 0 {
		return onnxErrf("node %q (%s) has no output", n.name, n.op)
	}
	for _, in := range n.inputs {
		if in == cur {
			return nil
		}
	}
	return onnxErrf("node %q (%s) does not take the running value %q: the graph is not a simple chain", n.name, n.op, cur)
}

// gemm starts a layer from Y = alpha·A·op(B) + beta·C with A the data.
func (c *chainBuilder) gemm(n onnxNode) error {
	if n.inputs[0] != c.cur {
		return onnxErrf("Gemm %q: the data must be input A", n.name)
	}
	if a := n.attrs["transA"]; a.i != 0 {
		return onnxErrf("Gemm %q has transA=1; expected samples as rows", n.name)
	}
	w, err := c.weightOf(n, 1)
	if err != nil {
		return err
	}
	if len(w.dims) != 2 {
		return onnxErrf("Gemm %q: weight %q has shape %v; expected 2-D", n.name, w.name, w.dims)
	}
	alpha, beta := 1.0, 1.0
	if a, ok := n.attrs["alpha"]; ok && a.hasF {
		alpha = a.f
	}
	if a, ok := n.attrs["beta"]; ok && a.hasF {
		beta = a.f
	}
	wm := mat.NewDense(w.dims[0], w.dims[1], append([]float64(nil), w.data...))
	if n.attrs["transB"].i == 0 {
		wm = mat.DenseCopyOf(wm.T()) // stored in×out
	}
	if alpha != 1 {
		wm.Scale(alpha, wm)
	}
	c.flush()
	out, _ := wm.Dims()
	c.pend = &nn.Layer{Weight: wm, Act: nn.Identity}
	if len(n.inputs) > 2 && n.inputs[2] != "" {
		ct, err := c.weightOf(n, 2)
		if err != nil {
			return err
		}
		bias, err := broadcastBias(ct, out, beta)
		if err != nil {
			return onnxErrf("Gemm %q: %v", n.name, err)
		}
		c.pend.Bias = bias
	}
	return nil
}

// matMul starts a layer from the data times an in×out weight.
func (c *chainBuilder) matMul(n onnxNode) error {
	if n.inputs[0] != c.cur || len(n.inputs) != 2 {
		return onnxErrf("MatMul %q: expected the data times a weight", n.name)
	}
	w, err := c.weightOf(n, 1)
	if err != nil {
		return err
	}
	if len(w.dims) != 2 {
		return onnxErrf("MatMul %q: weight %q has shape %v; expected 2-D (in × out)", n.name, w.name, w.dims)
	}
	c.flush()
	wm := mat.NewDense(w.dims[0], w.dims[1], append([]float64(nil), w.data...))
	c.pend = &nn.Layer{Weight: mat.DenseCopyOf(wm.T()), Act: nn.Identity}
	return nil
}

// add adds a bias to the pending layer.
func (c *chainBuilder) add(n onnxNode) error {
	if len(n.inputs) != 2 {
		return onnxErrf("Add %q needs two inputs", n.name)
	}
	other := 1
	if n.inputs[1] == c.cur {
		other = 0
	}
	if c.pend == nil || c.pend.Act != nn.Identity {
		return onnxErrf("Add %q does not follow a MatMul or Gemm", n.name)
	}
	ct, err := c.weightOf(n, other)
	if err != nil {
		return err
	}
	bias, err := broadcastBias(ct, c.pend.Out(), 1)
	if err != nil {
		return onnxErrf("Add %q: %v", n.name, err)
	}
	if c.pend.Bias == nil {
		c.pend.Bias = bias
	} else {
		for i := range bias {
			c.pend.Bias[i] += bias[i]
		}
	}
	return nil
}

// relu ends the pending layer with a ReLU.
func (c *chainBuilder) relu(n onnxNode) error {
	if c.pend == nil {
		return onnxErrf("Relu %q before any Linear layer is not supported", n.name)
	}
	if c.pend.Act == nn.ReLU {
		return onnxErrf("two Relu nodes in a row (%q)", n.name)
	}
	c.pend.Act = nn.ReLU
	c.flush()
	return nil
}

// rectified reads the activations WriteONNX writes after a Relu: Pow with
// a scalar exponent c (relupow<c>), and Exp then Sub of the scalar 1
// (reluexp). The Relu has already ended the layer, so they change the last
// layer's activation.
func (c *chainBuilder) rectified(n onnxNode) error {
	last := len(c.m.Layers) - 1
	if c.pend != nil || last < 0 || c.m.Layers[last].Act != nn.ReLU {
		return onnxErrf("%s %q does not follow a Relu; only relupow (Relu, Pow) and reluexp (Relu, Exp, Sub 1) are supported", n.op, n.name)
	}
	scalar := func() (float64, error) {
		if len(n.inputs) != 2 || n.inputs[0] != c.cur {
			return 0, onnxErrf("%s %q: expected the running value and a constant", n.op, n.name)
		}
		t, err := c.weightOf(n, 1)
		if err != nil {
			return 0, err
		}
		if len(t.data) != 1 {
			return 0, onnxErrf("%s %q: the constant %q has %d values; expected one", n.op, n.name, t.name, len(t.data))
		}
		return t.data[0], nil
	}
	switch {
	case n.op == "Pow" && !c.afterExp:
		p, err := scalar()
		if err != nil {
			return err
		}
		act, err := nn.ParseActivation(string(nn.RectPow(p)))
		if err != nil {
			return onnxErrf("Pow %q: %v", n.name, err)
		}
		c.m.Layers[last].Act = act
	case n.op == "Exp" && !c.afterExp:
		c.afterExp = true
	case n.op == "Sub" && c.afterExp:
		one, err := scalar()
		if err != nil {
			return err
		}
		if one != 1 {
			return onnxErrf("Sub %q subtracts %v after Exp; the rectified exponential subtracts 1", n.name, one)
		}
		c.afterExp = false
		c.m.Layers[last].Act = nn.RectExp
	default:
		return onnxErrf("%s %q in this place is not supported; only relupow (Relu, Pow) and reluexp (Relu, Exp, Sub 1) are", n.op, n.name)
	}
	return nil
}

// broadcastBias turns a bias tensor of shape [out], [1, out] or a scalar
// into a vector of length out, times beta.
func broadcastBias(c *onnxTensor, out int, beta float64) ([]float64, error) {
	n := len(c.data)
	b := make([]float64, out)
	switch {
	case n == out:
		copy(b, c.data)
	case n == 1:
		for i := range b {
			b[i] = c.data[0]
		}
	default:
		return nil, fmt.Errorf("bias %q has shape %v but the layer has %d outputs", c.name, c.dims, out)
	}
	if beta != 1 {
		for i := range b {
			b[i] *= beta
		}
	}
	return b, nil
}
