package modelfile

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// Writing ONNX: an MLP as an ONNX ModelProto (opset 13) that onnxruntime,
// onnx.reference and ReadONNX run or read. The protobuf is encoded by hand
// (pbEnc below, the writing twin of protobuf.go), with the field numbers of
// onnx/onnx.proto3 that onnx.go declares plus the few only a writer needs.

// ONNX field numbers (onnx/onnx.proto3) that only the writer uses.
const (
	modelIRVersion     = 1
	modelProducerName  = 2
	modelDocString     = 6
	modelOpsetImport   = 8
	modelMetadataProps = 14

	opsetDomain  = 1
	opsetVersion = 2

	entryKey   = 1
	entryValue = 2

	graphName = 2

	attrType       = 20
	attrTypeFloat  = 1 // AttributeProto.FLOAT
	attrTypeInt    = 2 // AttributeProto.INT
	attrTypeInts   = 7 // AttributeProto.INTS
	attrTypeTensor = 4 // AttributeProto.TENSOR

	valueInfoType = 2

	typeTensorType = 1 // TypeProto.tensor_type
	tensorElemType = 1 // TypeProto.Tensor.elem_type
	tensorShape    = 2 // TypeProto.Tensor.shape
	shapeDim       = 1 // TensorShapeProto.dim
	dimValue       = 1 // TensorShapeProto.Dimension.dim_value
	dimParam       = 2 // TensorShapeProto.Dimension.dim_param
)

const (
	// onnxIRVersion is the IR version written: 7 is the one of opset 13
	// (ONNX 1.8), the oldest that every current runtime reads.
	onnxIRVersion = 7
	// onnxOpset is the default-domain operator set written.
	onnxOpset = 13
	// ONNXInput and ONNXOutput name the graph's input (n × In, n symbolic)
	// and output (n × Out) in files written by WriteONNX.
	ONNXInput  = "input"
	ONNXOutput = "output"
	// onnxBatchDim is the symbolic name of the batch dimension.
	onnxBatchDim = "N"
	// maxONNXMessage is the largest protobuf message: 2 GiB − 1.
	maxONNXMessage = math.MaxInt32
)

// SaveONNX writes m to path as an ONNX model (see WriteONNX). The write is
// atomic: path is either left as it was or holds the whole file.
func SaveONNX(path string, m *nn.MLP, meta map[string]string, dtype string) error {
	return saveFile(path, "ONNX model", func(w io.Writer) error { return WriteONNX(w, m, meta, dtype) })
}

// WriteONNX writes m to w as an ONNX ModelProto: IR version 7, opset 13,
// producer "relurec", one graph input "input" of shape [N, In] with N a
// symbolic batch dimension and one output "output" of shape [N, Out], as
// torch.onnx.export writes an nn.Sequential with dynamic_axes on the batch.
// Each layer is a Gemm node (transB = 1, the weight in PyTorch's out × in
// layout, the bias as input C when the layer has one) followed by its
// activation in standard operators that compute it exactly:
//
//   - relu: Relu; identity: nothing;
//   - relupow<c>: Relu then Pow with the exponent c as a double constant
//     (so it stays exact in an F32 file too); max(x,0)^c = Relu(x)^c as
//     c > 0;
//   - reluexp: Relu, Exp, then Sub of the constant 1: e^{max(x,0)} − 1.
//     Runtimes compute exp(x) − 1 where Forward uses expm1(x); the two differ
//     by at most a few units in the last place of 1 (≈ 4e-16 in F64).
//
// Initializers are named like the safetensors keys of SaveModel ("0.weight",
// "0.bias", "2.weight", ...), so the two files of one model match. dtype ""
// or "F64" stores DOUBLE tensors and makes the graph compute in double,
// keeping every bit of the weights; "F32" stores FLOAT tensors and a float
// graph (weights that overflow float32 are an error). meta goes into the
// model's metadata_props, keys sorted, together with the architecture under
// MetaArchitecture (which overrides a caller key of that name). ReadONNX
// reads the file back to the same MLP (bit for bit in F64), rectified
// powers and exponentials included.
func WriteONNX(w io.Writer, m *nn.MLP, meta map[string]string, dtype string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	elem, err := onnxElemType(dtype)
	if err != nil {
		return err
	}
	model, err := onnxModel(m, meta, elem)
	if err != nil {
		return err
	}
	return writeONNXModel(w, model)
}

// onnxElemType is the ONNX tensor type of a file dtype: DOUBLE for "" or
// "F64", FLOAT for "F32".
func onnxElemType(dtype string) (int, error) {
	switch dtype {
	case "", "F64":
		return onnxDouble, nil
	case "F32":
		return onnxFloat, nil
	}
	return 0, errs.Inputf("modelfile: onnx: cannot write dtype %q; choose \"F64\" (exact) or \"F32\"", dtype)
}

// writeONNXModel writes an encoded ModelProto to w, refusing one larger
// than a protobuf message may be.
func writeONNXModel(w io.Writer, model *pbEnc) error {
	if model.size > maxONNXMessage {
		return errs.Inputf("modelfile: onnx: the model needs %d bytes but a protobuf message holds at most 2 GiB; save it as .safetensors", model.size)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := model.writeTo(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// onnxModel encodes the ModelProto of m with tensors of ONNX type elem.
func onnxModel(m *nn.MLP, meta map[string]string, elem int) (*pbEnc, error) {
	g, err := onnxGraphProto(m, elem)
	if err != nil {
		return nil, err
	}
	arch := make([]archLayer, len(m.Layers))
	for i, l := range m.Layers {
		arch[i] = archLayer{In: l.In(), Out: l.Out(), Bias: l.Bias != nil, Act: l.Act}
	}
	archJSON, err := json.Marshal(arch)
	if err != nil {
		return nil, err
	}
	return onnxModelProto(g, "MLP written by relurec (nn.WriteONNX)", meta, MetaArchitecture, string(archJSON)), nil
}

// onnxModelProto encodes a ModelProto around the graph g: IR version,
// producer, doc string, opset, and meta in metadata_props (keys sorted)
// together with the architecture arch under archKey, which overrides a
// caller key of that name. The writers' doc strings ("MLP written by
// relurec (nn.WriteONNX)" and the like) are part of the files and stay
// fixed, so that a model always gives the same bytes.
func onnxModelProto(g *pbEnc, doc string, meta map[string]string, archKey, arch string) *pbEnc {
	return onnxModelProtoOpset(g, doc, meta, archKey, arch, onnxOpset)
}

// onnxModelProtoOpset is onnxModelProto for the default-domain opset
// given, with the IR version it needs (7 up to opset 13, 8 up to 18, 9 up
// to 20, else 10).
func onnxModelProtoOpset(g *pbEnc, doc string, meta map[string]string, archKey, arch string, opsetV int) *pbEnc {
	all := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		all[k] = v
	}
	all[archKey] = arch
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	model := &pbEnc{}
	ir := onnxIRVersion
	switch {
	case opsetV > 20:
		ir = 10
	case opsetV > 18:
		ir = 9
	case opsetV > 13:
		ir = 8
	}
	model.varint(modelIRVersion, uint64(ir))
	model.str(modelProducerName, "relurec")
	model.str(modelDocString, doc)
	model.msg(modelGraph, g)
	opset := &pbEnc{}
	opset.str(opsetDomain, "")
	opset.varint(opsetVersion, uint64(opsetV))
	model.msg(modelOpsetImport, opset)
	for _, k := range keys {
		e := &pbEnc{}
		e.str(entryKey, k)
		e.str(entryValue, all[k])
		model.msg(modelMetadataProps, e)
	}
	return model
}

// onnxGraphProto encodes the GraphProto: one chain of nodes from ONNXInput
// to ONNXOutput, the weights as initializers.
func onnxGraphProto(m *nn.MLP, elem int) (*pbEnc, error) {
	acts := make([]nn.Activation, len(m.Layers))
	for i, l := range m.Layers {
		acts[i] = l.Act
	}
	idx := moduleIndices(acts)
	g := &pbEnc{}
	var inits []*pbEnc
	cur := ONNXInput
	for i, l := range m.Layers {
		prefix := fmt.Sprint(idx[i])
		last := i == len(m.Layers)-1
		// next names the output of the layer's next node: the graph
		// output for the last node of the last layer.
		steps := onnxActSteps(l.Act)
		step := 0
		next := func(op string) string {
			step++
			if last && step == steps+1 {
				return ONNXOutput
			}
			return fmt.Sprintf("/%s/%s_output", prefix, op)
		}

		r, c := l.Weight.Dims()
		wt, err := onnxTensorProto(prefix+".weight", []int{r, c}, rowMajor(l.Weight), elem)
		if err != nil {
			return nil, err
		}
		inits = append(inits, wt)
		in := []string{cur, prefix + ".weight"}
		if l.Bias != nil {
			bt, err := onnxTensorProto(prefix+".bias", []int{r}, l.Bias, elem)
			if err != nil {
				return nil, err
			}
			inits = append(inits, bt)
			in = append(in, prefix+".bias")
		}
		cur = next("Gemm")
		g.msg(graphNode, onnxNodeProto("/"+prefix+"/Gemm", "Gemm", in, cur, onnxIntAttr("transB", 1)))

		switch {
		case l.Act == nn.Identity:
		case l.Act == nn.ReLU:
			out := next("Relu")
			g.msg(graphNode, onnxNodeProto("/"+prefix+"/Relu", "Relu", []string{cur}, out))
			cur = out
		case l.Act == nn.RectExp:
			out := next("Relu")
			g.msg(graphNode, onnxNodeProto("/"+prefix+"/Relu", "Relu", []string{cur}, out))
			cur = out
			out = next("Exp")
			g.msg(graphNode, onnxNodeProto("/"+prefix+"/Exp", "Exp", []string{cur}, out))
			cur = out
			one, err := onnxTensorProto(prefix+".one", nil, []float64{1}, elem)
			if err != nil {
				return nil, err
			}
			inits = append(inits, one)
			out = next("Sub")
			g.msg(graphNode, onnxNodeProto("/"+prefix+"/Sub", "Sub", []string{cur, prefix + ".one"}, out))
			cur = out
		default:
			p, ok := l.Act.Power()
			if !ok {
				return nil, errs.Inputf("modelfile: onnx: layer %d has activation %q, which has no exact form in standard ONNX operators", i, l.Act)
			}
			out := next("Relu")
			g.msg(graphNode, onnxNodeProto("/"+prefix+"/Relu", "Relu", []string{cur}, out))
			cur = out
			exp, err := onnxTensorProto(prefix+".exponent", nil, []float64{p}, onnxDouble)
			if err != nil {
				return nil, err
			}
			inits = append(inits, exp)
			out = next("Pow")
			g.msg(graphNode, onnxNodeProto("/"+prefix+"/Pow", "Pow", []string{cur, prefix + ".exponent"}, out))
			cur = out
		}
	}
	g.str(graphName, "relurec_mlp")
	for _, t := range inits {
		g.msg(graphInitializer, t)
	}
	g.msg(graphInput, onnxValueInfo(ONNXInput, elem, []int{m.In()}))
	g.msg(graphOutput, onnxValueInfo(ONNXOutput, elem, []int{m.Out()}))
	return g, nil
}

// onnxActSteps is the number of nodes after the Gemm that an activation
// takes.
func onnxActSteps(a nn.Activation) int {
	switch {
	case a == nn.Identity:
		return 0
	case a == nn.ReLU:
		return 1
	case a == nn.RectExp:
		return 3
	}
	return 2 // Relu, Pow
}

// onnxNodeProto encodes a NodeProto of the default domain.
func onnxNodeProto(name, op string, in []string, out string, attrs ...*pbEnc) *pbEnc {
	n := &pbEnc{}
	for _, s := range in {
		n.str(nodeInput, s)
	}
	n.str(nodeOutput, out)
	n.str(nodeName, name)
	n.str(nodeOpType, op)
	for _, a := range attrs {
		n.msg(nodeAttribute, a)
	}
	return n
}

// onnxIntAttr encodes an AttributeProto holding one integer.
func onnxIntAttr(name string, v int64) *pbEnc {
	a := &pbEnc{}
	a.str(attrName, name)
	a.varint(attrI, uint64(v))
	a.varint(attrType, attrTypeInt)
	return a
}

// onnxIntsAttr encodes an AttributeProto holding a list of non-negative
// integers (unpacked, as the ONNX Python helpers write them).
func onnxIntsAttr(name string, vs ...int) *pbEnc {
	a := &pbEnc{}
	a.str(attrName, name)
	for _, v := range vs {
		a.varint(attrInts, uint64(v))
	}
	a.varint(attrType, attrTypeInts)
	return a
}

// onnxValueInfo encodes the ValueInfoProto of a graph input or output: a
// tensor of type elem and shape [N, dims...] with N the symbolic batch.
func onnxValueInfo(name string, elem int, dims []int) *pbEnc {
	batch := &pbEnc{}
	batch.str(dimParam, onnxBatchDim)
	shape := &pbEnc{}
	shape.msg(shapeDim, batch)
	for _, d := range dims {
		e := &pbEnc{}
		e.varint(dimValue, uint64(d))
		shape.msg(shapeDim, e)
	}
	tt := &pbEnc{}
	tt.varint(tensorElemType, uint64(elem))
	tt.msg(tensorShape, shape)
	typ := &pbEnc{}
	typ.msg(typeTensorType, tt)
	vi := &pbEnc{}
	vi.str(valueInfoName, name)
	vi.msg(valueInfoType, typ)
	return vi
}

// rowMajor returns the entries of m row-major (PyTorch's layout of a
// weight tensor), copied.
func rowMajor(m *mat.Dense) []float64 { return mat.DenseCopyOf(m).RawMatrix().Data }

// onnxTensorProto encodes a TensorProto with the values in raw_data
// (little-endian, row-major) as ONNX type elem (onnxDouble or onnxFloat);
// nil dims make a scalar. A value that overflows float32 is an error.
func onnxTensorProto(name string, dims []int, vals []float64, elem int) (*pbEnc, error) {
	t := &pbEnc{}
	for _, d := range dims {
		t.varint(tensorDims, uint64(d))
	}
	t.varint(tensorDataType, uint64(elem))
	t.str(tensorName, name)
	var raw []byte
	if elem == onnxFloat {
		raw = make([]byte, 4*len(vals))
		for i, v := range vals {
			f := float32(v)
			if math.IsInf(float64(f), 0) {
				return nil, errs.Inputf("modelfile: onnx: tensor %q element %d = %g overflows float32; save as F64", name, i, v)
			}
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
	} else {
		raw = make([]byte, 8*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
		}
	}
	t.bytes(tensorRawData, raw)
	return t, nil
}

// pbEnc is a protobuf message being encoded: a list of byte slices whose
// concatenation is the message. Nested messages and large payloads are
// linked in, not copied, so a model's weights are held once while the file
// is written.
type pbEnc struct {
	parts [][]byte
	size  int
}

// put appends b (linked, not copied).
func (p *pbEnc) put(b []byte) {
	p.parts = append(p.parts, b)
	p.size += len(b)
}

// key appends a field key followed by extra (a varint value or a length).
func (p *pbEnc) key(num, wire int, v uint64) {
	b := binary.AppendUvarint(nil, uint64(num)<<3|uint64(wire))
	p.put(binary.AppendUvarint(b, v))
}

// varint appends an integer field.
func (p *pbEnc) varint(num int, v uint64) { p.key(num, wireVarint, v) }

// bytes appends a bytes field (b is linked, not copied).
func (p *pbEnc) bytes(num int, b []byte) {
	p.key(num, wireBytes, uint64(len(b)))
	p.put(b)
}

// str appends a string field.
func (p *pbEnc) str(num int, s string) { p.bytes(num, []byte(s)) }

// msg appends a nested message field.
func (p *pbEnc) msg(num int, m *pbEnc) {
	p.key(num, wireBytes, uint64(m.size))
	p.parts = append(p.parts, m.parts...)
	p.size += m.size
}

// writeTo writes the encoded message.
func (p *pbEnc) writeTo(w io.Writer) error {
	for _, b := range p.parts {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
