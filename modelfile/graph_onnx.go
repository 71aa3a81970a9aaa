package modelfile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

// ONNX in and out for Graph: read with the MLP reader's protobuf, node and
// tensor code, written with its encoder.

// MetaGraph is the metadata key of a Graph's summary (its operators) in
// the ONNX files WriteGraphONNX writes.
const MetaGraph = "relurec.graph"

// LoadGraphONNX reads a Graph from an ONNX file; see ReadGraphONNX.
func LoadGraphONNX(path string) (*nn.Graph, error) {
	var gr *nn.Graph
	err := readFile(path, func(r io.Reader) (err error) { gr, err = ReadGraphONNX(r); return err })
	return gr, err
}

// ReadGraphONNX reads any ONNX model of Graph's operators as a Graph: the
// data input's declared shape [N, ...] gives one sample's shape (export
// with a sample of the real size), the initializers and Constant nodes
// the constants. Errors name the node and wrap ErrONNX and ErrModelFile.
func ReadGraphONNX(r io.Reader) (*nn.Graph, error) {
	g, err := readONNXGraph(r)
	if err != nil {
		return nil, err
	}
	return graphFromONNX(g)
}

// graphFromONNX builds and validates the Graph of g.
func graphFromONNX(g *onnxGraph) (*nn.Graph, error) {
	in, err := g.dataInput()
	if err != nil {
		return nil, err
	}
	dims := g.inputDims[in]
	if len(dims) < 2 || slices.ContainsFunc(dims[1:], func(d int) bool { return d <= 0 }) {
		return nil, onnxErrf("graph input %q has shape %v (-1: symbolic or missing); expected [N, ...] with every sample dimension given, as torch.onnx.export writes from a sample input of the real size", in, dims)
	}
	gr := &nn.Graph{Input: in, InputShape: slices.Clone(dims[1:]), Output: g.outputs[0], Consts: map[string]*nn.GraphTensor{}, Opset: g.opset}
	for name, t := range g.inits {
		gr.Consts[name] = graphTensor(t)
	}
	for _, n := range g.nodes {
		if n.op == "Constant" {
			continue
		}
		if !slices.Contains(nn.GraphOps(), n.op) {
			return nil, onnxErrf("unsupported operator %s (node %q); a graph may hold %v and Constant nodes", n.op, n.name, nn.GraphOps())
		}
		gn := nn.GraphNode{Name: n.name, Op: n.op, Inputs: slices.Clone(n.inputs), Outputs: slices.Clone(n.outs), Attrs: map[string]nn.GraphAttr{}}
		for name, a := range n.attrs {
			switch {
			case a.hasF:
				gn.Attrs[name] = nn.GraphAttr{Kind: "float", F: a.f}
			case a.hasI:
				gn.Attrs[name] = nn.GraphAttr{Kind: "int", I: a.i}
			case a.ints != nil:
				gn.Attrs[name] = nn.GraphAttr{Kind: "ints", Ints: a.ints}
			case a.t != nil:
				gn.Attrs[name] = nn.GraphAttr{Kind: "tensor", T: graphTensor(a.t)}
			}
		}
		gr.Nodes = append(gr.Nodes, gn)
	}
	if err := gr.Validate(); err != nil {
		if errors.Is(err, dataio.ErrTooLarge) {
			return nil, err // a sound model, too large for the budget
		}
		return nil, onnxErrf("%v", err)
	}
	return gr, nil
}

// graphTensor is the GraphTensor of an ONNX tensor.
func graphTensor(t *onnxTensor) *nn.GraphTensor {
	return &nn.GraphTensor{Shape: slices.Clone(t.dims), Data: t.data, Int: t.dtype == onnxInt64 || t.dtype == onnxInt32}
}

// isChain reports whether every node of g (Constant nodes aside) takes the
// previous node's output, from the data input: the shape of an MLP or a
// sequential CNN.
func (g *onnxGraph) isChain() bool {
	in, err := g.dataInput()
	if err != nil {
		return true
	}
	cur := in
	for _, n := range g.nodes {
		if n.op == "Constant" {
			continue
		}
		if checkChained(n, cur) != nil {
			return false
		}
		for _, x := range n.inputs {
			if _, ok := g.inits[x]; !ok && x != cur && x != "" {
				return false
			}
		}
		cur = n.outs[0]
	}
	return true
}

// SaveGraphONNX writes gr to path as an ONNX model (see WriteGraphONNX),
// atomically.
func SaveGraphONNX(path string, gr *nn.Graph, meta map[string]string, dtype string) error {
	return saveFile(path, "ONNX model", func(w io.Writer) error { return WriteGraphONNX(w, gr, meta, dtype) })
}

// WriteGraphONNX writes gr to w as an ONNX ModelProto in the graph's opset
// (13 when not given), with the IR version that opset needs: its nodes in
// order, its constants as initializers (sorted by name; floating-point
// ones as DOUBLE for dtype "" or "F64", FLOAT for "F32"; integer ones as
// INT64), the input [N, InputShape...] and the output [N, ...]. meta goes into metadata_props, with the operator counts
// under MetaGraph. ReadGraphONNX reads it back to the same graph.
func WriteGraphONNX(w io.Writer, gr *nn.Graph, meta map[string]string, dtype string) error {
	if err := gr.Validate(); err != nil {
		return err
	}
	elem, err := onnxElemType(dtype)
	if err != nil {
		return err
	}
	g := &pbEnc{}
	ops := map[string]int{}
	for _, n := range gr.Nodes {
		ops[n.Op]++
		names := make([]string, 0, len(n.Attrs))
		for k := range n.Attrs {
			names = append(names, k)
		}
		sort.Strings(names)
		var attrs []*pbEnc
		for _, k := range names {
			a := n.Attrs[k]
			switch a.Kind {
			case "int":
				attrs = append(attrs, onnxIntAttr(k, a.I))
			case "float":
				attrs = append(attrs, onnxFloatAttr(k, a.F))
			case "ints":
				vs := make([]int, len(a.Ints))
				for i, v := range a.Ints {
					vs[i] = int(v)
				}
				attrs = append(attrs, onnxIntsAttr(k, vs...))
			case "tensor":
				t, err := graphTensorProto("", a.T, elem)
				if err != nil {
					return err
				}
				attrs = append(attrs, onnxTensorAttr(k, t))
			}
		}
		p := onnxNodeProto(n.Name, n.Op, n.Inputs, n.Outputs[0], attrs...)
		for _, o := range n.Outputs[1:] {
			p.str(nodeOutput, o) // after the name and op: any field order parses
		}
		g.msg(graphNode, p)
	}
	g.str(graphName, "relurec_graph")
	names := make([]string, 0, len(gr.Consts))
	for k := range gr.Consts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		tp, err := graphTensorProto(k, gr.Consts[k], elem)
		if err != nil {
			return err
		}
		g.msg(graphInitializer, tp)
	}
	g.msg(graphInput, onnxValueInfo(gr.Input, elem, gr.InputShape))
	g.msg(graphOutput, onnxValueInfo(gr.Output, elem, gr.OutputShape()))
	arch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	opset := gr.Opset
	if opset == 0 {
		opset = onnxOpset
	}
	doc := "graph written by relurec (nn.WriteGraphONNX)"
	return writeONNXModel(w, onnxModelProtoOpset(g, doc, meta, MetaGraph, string(arch), opset))
}

// graphTensorProto encodes a constant as a TensorProto: INT64 when it is
// an integer tensor, else of the element type elem.
func graphTensorProto(name string, t *nn.GraphTensor, elem int) (*pbEnc, error) {
	if t.Int {
		return onnxInt64Tensor(name, t.Shape, t.Data), nil
	}
	return onnxTensorProto(name, t.Shape, t.Data, elem)
}

// onnxTensorAttr encodes an AttributeProto holding a tensor.
func onnxTensorAttr(name string, t *pbEnc) *pbEnc {
	a := &pbEnc{}
	a.str(attrName, name)
	a.msg(attrT, t)
	a.varint(attrType, attrTypeTensor)
	return a
}

// onnxFloatAttr encodes an AttributeProto holding one float.
func onnxFloatAttr(name string, v float64) *pbEnc {
	a := &pbEnc{}
	a.str(attrName, name)
	a.put(binary.AppendUvarint(nil, uint64(attrF)<<3|wireFixed32))
	a.put(binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(v))))
	a.varint(attrType, attrTypeFloat)
	return a
}

// onnxInt64Tensor encodes an INT64 TensorProto with the values in
// raw_data.
func onnxInt64Tensor(name string, dims []int, vals []float64) *pbEnc {
	t := &pbEnc{}
	for _, d := range dims {
		t.varint(tensorDims, uint64(d))
	}
	t.varint(tensorDataType, onnxInt64)
	t.str(tensorName, name)
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(int64(v)))
	}
	t.bytes(tensorRawData, raw)
	return t
}
