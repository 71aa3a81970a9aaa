package nn

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/relurec/relurec/dataio"
)

// ONNX in and out for Graph: read with the MLP reader's protobuf, node and
// tensor code, written with its encoder.

// MetaGraph is the metadata key of a Graph's summary (its operators) in
// the ONNX files WriteGraphONNX writes.
const MetaGraph = "relurec.graph"

// LoadGraphONNX reads a Graph from an ONNX file; see ReadGraphONNX.
func LoadGraphONNX(path string) (*Graph, error) {
	var gr *Graph
	err := readFile(path, func(r io.Reader) (err error) { gr, err = ReadGraphONNX(r); return err })
	return gr, err
}

// ReadGraphONNX reads any ONNX model of Graph's operators as a Graph: the
// data input's declared shape [N, ...] gives one sample's shape (export
// with a sample of the real size), the initializers and Constant nodes
// the constants. Errors name the node and wrap ErrONNX and ErrModelFile.
func ReadGraphONNX(r io.Reader) (*Graph, error) {
	g, err := readONNXGraph(r)
	if err != nil {
		return nil, err
	}
	return graphFromONNX(g)
}

// graphFromONNX builds and validates the Graph of g.
func graphFromONNX(g *onnxGraph) (*Graph, error) {
	in, err := g.dataInput()
	if err != nil {
		return nil, err
	}
	dims := g.inputDims[in]
	if len(dims) < 2 || slices.ContainsFunc(dims[1:], func(d int) bool { return d <= 0 }) {
		return nil, onnxErrf("graph input %q has shape %v (-1: symbolic or missing); expected [N, ...] with every sample dimension given, as torch.onnx.export writes from a sample input of the real size", in, dims)
	}
	gr := &Graph{Input: in, InputShape: slices.Clone(dims[1:]), Output: g.outputs[0], Consts: map[string]*GraphTensor{}}
	for name, t := range g.inits {
		gr.Consts[name] = &GraphTensor{Shape: slices.Clone(t.dims), Data: t.data, Int: t.dtype == onnxInt64 || t.dtype == onnxInt32}
	}
	for _, n := range g.nodes {
		if n.op == "Constant" {
			continue
		}
		if !slices.Contains(graphOps, n.op) {
			return nil, onnxErrf("unsupported operator %s (node %q); a graph may hold %v and Constant nodes", n.op, n.name, graphOps)
		}
		gn := GraphNode{Name: n.name, Op: n.op, Inputs: slices.Clone(n.inputs), Outputs: slices.Clone(n.outs), Attrs: map[string]GraphAttr{}}
		for name, a := range n.attrs {
			switch {
			case a.hasF:
				gn.Attrs[name] = GraphAttr{Kind: "float", F: a.f}
			case a.hasI:
				gn.Attrs[name] = GraphAttr{Kind: "int", I: a.i}
			case a.ints != nil:
				gn.Attrs[name] = GraphAttr{Kind: "ints", Ints: a.ints}
			}
		}
		// Opset 18 gives ReduceMean its axes as an input; keep them as the
		// attribute of opset 13, which WriteGraphONNX writes.
		if n.op == "ReduceMean" && len(n.inputs) > 1 && n.inputs[1] != "" {
			t, ok := g.inits[n.inputs[1]]
			if !ok {
				return nil, onnxErrf("ReduceMean %q: the axes must be a constant", n.name)
			}
			ax := make([]int64, len(t.data))
			for i, v := range t.data {
				ax[i] = int64(v)
			}
			gn.Attrs["axes"] = GraphAttr{Kind: "ints", Ints: ax}
			gn.Inputs = gn.Inputs[:1]
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
func SaveGraphONNX(path string, gr *Graph, meta map[string]string, dtype string) error {
	err := dataio.AtomicWriteFile(path, func(w io.Writer) error { return WriteGraphONNX(w, gr, meta, dtype) })
	if err != nil {
		return fmt.Errorf("nn: saving ONNX model to %s: %w", path, err)
	}
	return nil
}

// WriteGraphONNX writes gr to w as an ONNX ModelProto (IR version 7,
// opset 13): its nodes in order, its constants as initializers (sorted by
// name; floating-point ones as DOUBLE for dtype "" or "F64", FLOAT for
// "F32"; integer ones as INT64), the input [N, InputShape...] and the
// output [N, ...]. meta goes into metadata_props, with the operator counts
// under MetaGraph. ReadGraphONNX reads it back to the same graph.
func WriteGraphONNX(w io.Writer, gr *Graph, meta map[string]string, dtype string) error {
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
		t := gr.Consts[k]
		var tp *pbEnc
		if t.Int {
			tp = onnxInt64Tensor(k, t.Shape, t.Data)
		} else if tp, err = onnxTensorProto(k, t.Shape, t.Data, elem); err != nil {
			return err
		}
		g.msg(graphInitializer, tp)
	}
	g.msg(graphInput, onnxValueInfo(gr.Input, elem, gr.InputShape))
	g.msg(graphOutput, onnxValueInfo(gr.Output, elem, gr.outShape))
	arch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return writeONNXModel(w, onnxModelProto(g, "graph written by relurec (nn.WriteGraphONNX)", meta, MetaGraph, string(arch)))
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
