package modelfile

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

// ONNX in and out for CNNs: the graph torch.onnx.export writes for an
// nn.Sequential of Conv2d, ReLU, MaxPool2d, Flatten and Linear (Conv, Relu,
// MaxPool, Flatten and Gemm nodes, or MatMul + Add for a Linear), read with
// the MLP reader's protobuf, tensor and Gemm code and written with its
// encoder.

// LoadCNNONNX reads a CNN from an ONNX file; see ReadCNNONNX.
func LoadCNNONNX(path string) (*nn.CNN, error) {
	var net *nn.CNN
	err := readFile(path, func(r io.Reader) (err error) { net, err = ReadCNNONNX(r); return err })
	return net, err
}

// LoadONNXNetwork reads an ONNX file as a CNN if its graph has a Conv or
// MaxPool node, else as an MLP; see ReadONNXNetwork.
func LoadONNXNetwork(path string) (nn.Network, error) {
	var net nn.Network
	err := readFile(path, func(r io.Reader) (err error) { net, err = ReadONNXNetwork(r); return err })
	return net, err
}

// ReadONNXNetwork reads an ONNX model from r: a *CNN if its graph is a
// chain with a Conv or MaxPool node (ReadCNNONNX), an *MLP if it is a
// chain the MLP reader takes (ReadONNX), else a *Graph (ReadGraphONNX:
// residual and mixer blocks).
func ReadONNXNetwork(r io.Reader) (nn.Network, error) {
	g, err := readONNXGraph(r)
	if err != nil {
		return nil, err
	}
	if !g.isChain() {
		gr, err := graphFromONNX(g)
		if err != nil {
			return nil, err
		}
		return gr, nil
	}
	var net nn.Network
	if _, ok := g.convNode(); ok {
		net, err = cnnFromGraph(g)
	} else {
		net, err = mlpFromGraph(g)
	}
	if err != nil {
		// A chain of operators the MLP and CNN readers do not take
		// (Transpose, ReduceMean, ...) may still be a Graph, possibly one
		// too large for the memory budget.
		gr, gerr := graphFromONNX(g)
		if gerr == nil {
			return gr, nil
		}
		if errors.Is(gerr, dataio.ErrTooLarge) {
			return nil, gerr
		}
		return nil, err // a nil Network, not a nil *CNN in one
	}
	return net, nil
}

// ReadCNNONNX reads a CNN from an ONNX model as torch.onnx.export writes an
// nn.Sequential of Conv2d, ReLU, MaxPool2d, Flatten and Linear (also
// Identity and Dropout, no-ops at inference): the input shape [N, C, H, W]
// from the graph input (export with a sample of the real size), the layers
// from the chain of Conv, Relu, MaxPool, Flatten, Gemm (or MatMul then Add)
// nodes. Convolutions must have group 1, dilation 1 and symmetric explicit
// padding; pooling ceil_mode 0, dilation 1 and no indices output. Errors
// name the node and wrap ErrONNX and ErrModelFile.
func ReadCNNONNX(r io.Reader) (*nn.CNN, error) {
	g, err := readONNXGraph(r)
	if err != nil {
		return nil, err
	}
	return cnnFromGraph(g)
}

// cnnBuilder walks a graph's chain of nodes and collects CNN layers.
type cnnBuilder struct {
	net   *nn.CNN
	nodes []string // the node each layer came from, for errors
	// lin assembles Linear layers from Gemm, MatMul and Add nodes with the
	// MLP reader's code; drain moves them to net.
	lin      *chainBuilder
	linNodes []string
	cur      string
}

// cnnFromGraph builds the CNN a graph computes from its data input to its
// output and checks its shapes, naming the node that does not fit.
func cnnFromGraph(g *onnxGraph) (*nn.CNN, error) {
	in, err := g.dataInput()
	if err != nil {
		return nil, err
	}
	shape, err := cnnInputShape(in, g.inputDims[in])
	if err != nil {
		return nil, err
	}
	b := &cnnBuilder{net: &nn.CNN{Input: shape}, lin: &chainBuilder{inits: g.inits, m: &nn.MLP{}}, cur: in}
	for _, n := range g.nodes {
		if err := b.step(n); err != nil {
			return nil, err
		}
	}
	b.drain()
	if b.cur != g.outputs[0] {
		return nil, onnxErrf("the chain of nodes ends at %q but the graph output is %q", b.cur, g.outputs[0])
	}
	if len(b.net.Layers) == 0 {
		return nil, onnxErrf("no layers found")
	}
	if _, err := b.net.Shapes(); err != nil {
		if i := b.net.FailingLayer(); i >= 0 {
			return nil, onnxErrf("node %q: %v", b.nodes[i], err)
		}
		return nil, onnxErrf("%v", err)
	}
	if err := b.net.Validate(); err != nil {
		return nil, onnxErrf("%v", err)
	}
	return b.net, nil
}

// cnnInputShape turns the declared shape of the graph input into one
// sample's shape: [N, C, H, W] gives C×H×W maps, [N, D] a flat vector.
func cnnInputShape(name string, dims []int) (nn.FeatureShape, error) {
	known := func(ds []int) bool { return !slices.ContainsFunc(ds, func(d int) bool { return d <= 0 }) }
	switch {
	case len(dims) == 4 && known(dims[1:]):
		return nn.FeatureShape{C: dims[1], H: dims[2], W: dims[3]}, nil
	case len(dims) == 2 && known(dims[1:]):
		return nn.FeatureShape{C: dims[1], H: 1, W: 1, Flat: true}, nil
	}
	return nn.FeatureShape{}, onnxErrf("graph input %q has shape %v (-1: symbolic or missing); a CNN needs [N, C, H, W] with C, H and W given, as torch.onnx.export writes from a sample input of the real size", name, dims)
}

// add appends a layer made by node.
func (b *cnnBuilder) add(l nn.CNNLayer, node string) {
	b.net.Layers = append(b.net.Layers, l)
	b.nodes = append(b.nodes, node)
}

// drain moves the Linear layers assembled so far to the network.
func (b *cnnBuilder) drain() {
	b.lin.flush()
	for i, l := range b.lin.m.Layers {
		b.add(&nn.Linear{Weight: l.Weight, Bias: l.Bias}, b.linNodes[i])
	}
	b.lin.m.Layers, b.linNodes = nil, nil
}

// step applies one node of the chain.
func (b *cnnBuilder) step(n onnxNode) error {
	if n.op == "Constant" {
		return nil
	}
	if err := checkChained(n, b.cur); err != nil {
		return err
	}
	var err error
	switch n.op {
	case "Gemm", "MatMul":
		b.lin.cur = b.cur
		b.linNodes = append(b.linNodes, n.name)
		if n.op == "Gemm" {
			err = b.lin.gemm(n)
		} else {
			err = b.lin.matMul(n)
		}
	case "Add":
		b.lin.cur = b.cur
		err = b.lin.add(n)
	case "Relu":
		b.drain()
		b.add(&nn.ReLULayer{}, n.name)
	case "Conv":
		b.drain()
		var c *nn.Conv2d
		if c, err = b.conv(n); err == nil {
			b.add(c, n.name)
		}
	case "MaxPool":
		b.drain()
		var p *nn.MaxPool2d
		if p, err = maxPool(n); err == nil {
			b.add(p, n.name)
		}
	case "Flatten":
		if a, ok := n.attrs["axis"]; ok && a.hasI && a.i != 1 {
			return onnxErrf("Flatten %q with axis %d; only axis 1 keeps samples as rows", n.name, a.i)
		}
		b.drain()
		b.add(&nn.Flatten{}, n.name)
	case "Identity", "Dropout":
	default:
		return onnxErrf("unsupported operator %s (node %q); a CNN may hold Conv, Relu, MaxPool, Flatten, Gemm, MatMul, Add, Identity, Dropout and Constant nodes", n.op, n.name)
	}
	if err != nil {
		return err
	}
	b.cur = n.outs[0]
	return nil
}

// conv reads a Conv node: data, a 4-D weight and an optional bias, with
// group 1, dilation 1 and symmetric padding.
func (b *cnnBuilder) conv(n onnxNode) (*nn.Conv2d, error) {
	if n.inputs[0] != b.cur {
		return nil, onnxErrf("Conv %q: the data must be input X", n.name)
	}
	w, err := b.lin.weightOf(n, 1)
	if err != nil {
		return nil, err
	}
	if len(w.dims) != 4 || slices.Contains(w.dims, 0) {
		return nil, onnxErrf("Conv %q: weight %q has shape %v; expected 4-D (out × in × kh × kw): only non-empty 2-D convolutions are supported", n.name, w.name, w.dims)
	}
	out, kh, kw := w.dims[0], w.dims[2], w.dims[3]
	if err := onlyDefaults(n, "group", "dilations"); err != nil {
		return nil, err
	}
	if ks, ok := n.attrs["kernel_shape"]; ok && !slices.Equal(ks.ints, []int64{int64(kh), int64(kw)}) {
		return nil, onnxErrf("Conv %q: kernel_shape %v does not match the weight %q of shape %v (kernel %d×%d)", n.name, ks.ints, w.name, w.dims, kh, kw)
	}
	c := &nn.Conv2d{Weight: mat.NewDense(out, w.dims[1]*kh*kw, slices.Clone(w.data)), Kernel: [2]int{kh, kw}}
	if c.Stride, err = pairAttr(n, "strides", [2]int{1, 1}); err != nil {
		return nil, err
	}
	if c.Padding, err = padsAttr(n); err != nil {
		return nil, err
	}
	if len(n.inputs) > 2 && n.inputs[2] != "" {
		bt, err := b.lin.weightOf(n, 2)
		if err != nil {
			return nil, err
		}
		if len(bt.data) != out {
			return nil, onnxErrf("Conv %q: bias %q has shape %v but the weight has %d output channels", n.name, bt.name, bt.dims, out)
		}
		c.Bias = slices.Clone(bt.data)
	}
	return c, nil
}

// maxPool reads a MaxPool node. ONNX's default stride is 1 (PyTorch's is
// the kernel), so the stride is always set explicitly.
func maxPool(n onnxNode) (*nn.MaxPool2d, error) {
	if len(n.inputs) != 1 || len(n.outs) > 1 && n.outs[1] != "" {
		return nil, onnxErrf("MaxPool %q: expected one input and one output (return_indices=False)", n.name)
	}
	if err := onlyDefaults(n, "ceil_mode", "dilations", "storage_order"); err != nil {
		return nil, err
	}
	ks := n.attrs["kernel_shape"].ints
	if len(ks) != 2 || ks[0] <= 0 || ks[1] <= 0 {
		return nil, onnxErrf("MaxPool %q: kernel_shape %v; expected two positive sizes (2-D pooling)", n.name, ks)
	}
	p := &nn.MaxPool2d{Kernel: [2]int{int(ks[0]), int(ks[1])}}
	var err error
	if p.Stride, err = pairAttr(n, "strides", [2]int{1, 1}); err != nil {
		return nil, err
	}
	if p.Padding, err = padsAttr(n); err != nil {
		return nil, err
	}
	return p, nil
}

// onlyDefaults refuses the named attributes unless they hold their
// defaults (1 for group and every dilation, 0 for ceil_mode and
// storage_order), and any auto_pad other than NOTSET.
func onlyDefaults(n onnxNode, names ...string) error {
	for _, name := range names {
		a, ok := n.attrs[name]
		if !ok {
			continue
		}
		def := int64(1)
		if name == "ceil_mode" || name == "storage_order" {
			def = 0
		}
		vals := a.ints
		if a.hasI {
			vals = append(vals, a.i)
		}
		for _, v := range vals {
			if v != def {
				return onnxErrf("%s %q has %s %v; only %d is supported (PyTorch's defaults: groups=1, dilation=1, ceil_mode=False)", n.op, n.name, name, vals, def)
			}
		}
	}
	if a, ok := n.attrs["auto_pad"]; ok && a.s != "" && a.s != "NOTSET" {
		return onnxErrf("%s %q has auto_pad %s; only explicit pads are supported", n.op, n.name, a.s)
	}
	return nil
}

// pairAttr reads a two-integer attribute such as strides, def when absent.
func pairAttr(n onnxNode, name string, def [2]int) ([2]int, error) {
	a, ok := n.attrs[name]
	if !ok {
		return def, nil
	}
	if len(a.ints) != 2 || a.ints[0] <= 0 || a.ints[1] <= 0 || a.ints[0] > 1<<20 || a.ints[1] > 1<<20 {
		return def, onnxErrf("%s %q: %s %v; expected two positive integers", n.op, n.name, name, a.ints)
	}
	return [2]int{int(a.ints[0]), int(a.ints[1])}, nil
}

// padsAttr reads ONNX pads [top, left, bottom, right], which must be
// symmetric (PyTorch's padding=(ph, pw)); zero when absent.
func padsAttr(n onnxNode) ([2]int, error) {
	a, ok := n.attrs["pads"]
	if !ok {
		return [2]int{}, nil
	}
	p := a.ints
	if len(p) != 4 || p[0] != p[2] || p[1] != p[3] || p[0] < 0 || p[1] < 0 || p[0] > 1<<20 || p[1] > 1<<20 {
		return [2]int{}, onnxErrf("%s %q: pads %v; expected [ph, pw, ph, pw] with ph, pw ≥ 0 (the same on both sides, as PyTorch pads)", n.op, n.name, p)
	}
	return [2]int{int(p[0]), int(p[1])}, nil
}

// SaveCNNONNX writes net to path as an ONNX model (see WriteCNNONNX),
// atomically.
func SaveCNNONNX(path string, net *nn.CNN, meta map[string]string, dtype string) error {
	return saveFile(path, "ONNX model", func(w io.Writer) error { return WriteCNNONNX(w, net, meta, dtype) })
}

// WriteCNNONNX writes net to w as an ONNX ModelProto in the form
// torch.onnx.export gives an nn.Sequential: IR version 7, opset 13, input
// "input" of shape [N, C, H, W] (N symbolic), output "output" of shape
// [N, Out], one node per module — Conv (kernel_shape, strides, pads,
// dilations 1, group 1), Relu, MaxPool (kernel_shape, strides, pads,
// ceil_mode 0), Flatten (axis 1), Gemm (transB 1) — with initializers
// named like the state dict ("0.weight", "0.bias", "3.weight", ...; conv
// weights 4-D). dtype "" or "F64" writes DOUBLE tensors and a double graph
// (every bit kept), "F32" FLOAT ones. meta goes into metadata_props with
// the architecture under MetaCNN. ReadCNNONNX reads it back to the same
// network.
func WriteCNNONNX(w io.Writer, net *nn.CNN, meta map[string]string, dtype string) error {
	if err := net.Validate(); err != nil {
		return err
	}
	elem, err := onnxElemType(dtype)
	if err != nil {
		return err
	}
	shapes, _ := net.Shapes()
	arch, err := cnnArchJSON(net)
	if err != nil {
		return err
	}
	g := &pbEnc{}
	var inits []*pbEnc
	cur := ONNXInput
	for i, l := range net.Layers {
		prefix, op := fmt.Sprint(i), onnxOp(l)
		out := fmt.Sprintf("/%d/%s_output_0", i, op)
		if i == len(net.Layers)-1 {
			out = ONNXOutput
		}
		in := []string{cur}
		var attrs []*pbEnc
		if w, bias := nn.LayerParams(l); w != nil {
			dims := []int{0, 0}
			dims[0], dims[1] = w.Dims()
			if c, ok := l.(*nn.Conv2d); ok {
				dims = []int{c.OutChannels(), c.InChannels(), c.Kernel[0], c.Kernel[1]}
			}
			wt, err := onnxTensorProto(prefix+".weight", dims, rowMajor(w), elem)
			if err != nil {
				return err
			}
			inits = append(inits, wt)
			in = append(in, prefix+".weight")
			if bias != nil {
				bt, err := onnxTensorProto(prefix+".bias", dims[:1], bias, elem)
				if err != nil {
					return err
				}
				inits = append(inits, bt)
				in = append(in, prefix+".bias")
			}
		}
		switch l := l.(type) {
		case *nn.Conv2d:
			s := l.Strides()
			attrs = []*pbEnc{onnxIntsAttr("dilations", 1, 1), onnxIntAttr("group", 1),
				onnxIntsAttr("kernel_shape", l.Kernel[0], l.Kernel[1]),
				onnxIntsAttr("pads", l.Padding[0], l.Padding[1], l.Padding[0], l.Padding[1]),
				onnxIntsAttr("strides", s[0], s[1])}
		case *nn.MaxPool2d:
			s := l.Strides()
			attrs = []*pbEnc{onnxIntAttr("ceil_mode", 0),
				onnxIntsAttr("kernel_shape", l.Kernel[0], l.Kernel[1]),
				onnxIntsAttr("pads", l.Padding[0], l.Padding[1], l.Padding[0], l.Padding[1]),
				onnxIntsAttr("strides", s[0], s[1])}
		case *nn.Flatten:
			attrs = []*pbEnc{onnxIntAttr("axis", 1)}
		case *nn.Linear:
			attrs = []*pbEnc{onnxIntAttr("transB", 1)}
		}
		g.msg(graphNode, onnxNodeProto(fmt.Sprintf("/%d/%s", i, op), op, in, out, attrs...))
		cur = out
	}
	g.str(graphName, "relurec_cnn")
	for _, t := range inits {
		g.msg(graphInitializer, t)
	}
	inDims := []int{net.Input.C, net.Input.H, net.Input.W}
	if net.Input.Flat {
		inDims = inDims[:1]
	}
	outDims := []int{shapes[len(shapes)-1].C, shapes[len(shapes)-1].H, shapes[len(shapes)-1].W}
	if shapes[len(shapes)-1].Flat {
		outDims = outDims[:1]
	}
	g.msg(graphInput, onnxValueInfo(ONNXInput, elem, inDims))
	g.msg(graphOutput, onnxValueInfo(ONNXOutput, elem, outDims))
	return writeONNXModel(w, onnxModelProto(g, "CNN written by relurec (nn.WriteCNNONNX)", meta, MetaCNN, arch))
}

// onnxOp is the ONNX operator a CNN module is written as.
func onnxOp(l nn.CNNLayer) string {
	switch l.(type) {
	case *nn.Conv2d:
		return "Conv"
	case *nn.ReLULayer:
		return "Relu"
	case *nn.MaxPool2d:
		return "MaxPool"
	case *nn.Flatten:
		return "Flatten"
	case *nn.Linear:
		return "Gemm"
	}
	panic(fmt.Sprintf("modelfile: no ONNX operator for the CNN module %T", l))
}
