package nn

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/half"
)

// ErrONNX marks an ONNX file that is corrupt or does not describe an MLP this
// package can import. Errors wrapping it also match ErrModelFile, so callers
// that handle bad model files in general need no change.
var ErrONNX = errs.New("invalid or unsupported ONNX model; expected an nn.Sequential of Linear and ReLU modules exported by torch.onnx.export (Gemm/MatMul/Add/Relu nodes, weights inside the file)", errs.ErrInput)

// onnxError wraps ErrONNX (so errs.ErrInput) and also reports itself as
// ErrModelFile.
type onnxError struct{ msg string }

func (e *onnxError) Unwrap() error { return ErrONNX }

func (e *onnxError) Error() string { return "onnx: " + e.msg + ": " + ErrONNX.Error() }

func (e *onnxError) Is(target error) bool { return target == ErrModelFile }

func onnxErrf(format string, args ...any) error {
	return &onnxError{msg: fmt.Sprintf(format, args...)}
}

// maxONNXBytes bounds the file size: protobuf messages cannot exceed 2 GiB,
// and an MLP that fits in memory is far smaller.
const maxONNXBytes = 2 << 30

// ONNX field numbers (onnx/onnx.proto3) of the messages we read.
const (
	modelGraph = 7

	graphNode        = 1
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12

	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	attrName = 1
	attrF    = 2
	attrI    = 3
	attrT    = 5

	tensorDims         = 1
	tensorDataType     = 2
	tensorFloatData    = 4
	tensorInt32Data    = 5
	tensorInt64Data    = 7
	tensorName         = 8
	tensorRawData      = 9
	tensorDoubleData   = 10
	tensorDataLocation = 14

	valueInfoName = 1
)

// ONNX TensorProto data types we decode.
const (
	onnxFloat    = 1
	onnxInt32    = 6
	onnxInt64    = 7
	onnxFloat16  = 10
	onnxDouble   = 11
	onnxBFloat16 = 16
)

type onnxTensor struct {
	name string
	dims []int
	data []float64
}

type onnxAttr struct {
	f    float64
	i    int64
	t    *onnxTensor
	hasF bool
	hasI bool
}

type onnxNode struct {
	name, op     string
	inputs, outs []string
	attrs        map[string]onnxAttr
}

// LoadONNX reads an MLP from an ONNX file as torch.onnx.export writes it for
// an nn.Sequential of Linear and ReLU modules (also Flatten, Identity and
// Dropout, which are no-ops at inference): the weights come from the graph
// initializers, the layers from the chain of Gemm (or MatMul followed by
// Add) and Relu nodes from the graph input to its output. Errors wrap ErrONNX
// and ErrModelFile.
func LoadONNX(path string) (*MLP, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nn: %w", err)
	}
	defer f.Close()
	m, err := ReadONNX(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	return m, nil
}

// ReadONNX reads an ONNX model from r; see LoadONNX.
func ReadONNX(r io.Reader) (*MLP, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxONNXBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxONNXBytes {
		return nil, onnxErrf("file larger than 2 GiB, the protobuf limit")
	}
	if len(b) == 0 {
		return nil, onnxErrf("empty file")
	}
	model, err := pbFields(b)
	if err != nil {
		return nil, onnxErrf("not a protobuf ModelProto (%v)", err)
	}
	var graph []byte
	for _, f := range model {
		if f.num == modelGraph && f.wire == wireBytes {
			graph = f.b
		}
	}
	if graph == nil {
		return nil, onnxErrf("the model has no graph")
	}
	return parseGraph(graph)
}

func parseGraph(b []byte) (*MLP, error) {
	fields, err := pbFields(b)
	if err != nil {
		return nil, onnxErrf("graph: %v", err)
	}
	inits := map[string]*onnxTensor{}
	var nodes []onnxNode
	var inputs, outputs []string
	for _, f := range fields {
		switch f.num {
		case graphInitializer:
			t, err := parseTensor(f.b)
			if err != nil {
				return nil, err
			}
			inits[t.name] = t
		case graphNode:
			n, err := parseNode(f.b)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
		case graphInput, graphOutput:
			if f.wire != wireBytes {
				return nil, onnxErrf("graph input/output is not a message")
			}
			vf, err := pbFields(f.b)
			if err != nil {
				return nil, onnxErrf("graph input/output: %v", err)
			}
			name := ""
			for _, v := range vf {
				if v.num == valueInfoName {
					if name, err = v.str(); err != nil {
						return nil, onnxErrf("graph input/output name: %v", err)
					}
				}
			}
			if f.num == graphInput {
				inputs = append(inputs, name)
			} else {
				outputs = append(outputs, name)
			}
		}
	}
	// Constant nodes are initializers written as nodes.
	for _, n := range nodes {
		if n.op == "Constant" && len(n.outs) == 1 {
			if a, ok := n.attrs["value"]; ok && a.t != nil {
				t := *a.t
				t.name = n.outs[0]
				inits[t.name] = &t
			}
		}
	}
	var data []string
	for _, in := range inputs {
		if _, isInit := inits[in]; !isInit {
			data = append(data, in)
		}
	}
	if len(data) != 1 {
		return nil, onnxErrf("the graph has %d data inputs %v; expected exactly one (the MLP's input)", len(data), data)
	}
	if len(outputs) != 1 {
		return nil, onnxErrf("the graph has %d outputs; expected exactly one", len(outputs))
	}

	cur := data[0]
	m := &MLP{}
	var pend *Layer // the layer being assembled (weight seen, activation not yet)
	flush := func() {
		if pend != nil {
			m.Layers = append(m.Layers, *pend)
			pend = nil
		}
	}
	weightOf := func(n onnxNode, i int) (*onnxTensor, error) {
		if i >= len(n.inputs) {
			return nil, onnxErrf("node %q (%s) lacks input %d", n.name, n.op, i)
		}
		t, ok := inits[n.inputs[i]]
		if !ok {
			return nil, onnxErrf("node %q (%s): input %q is computed, not a weight; only chains of Linear/ReLU layers are supported", n.name, n.op, n.inputs[i])
		}
		return t, nil
	}
	for _, n := range nodes {
		if n.op == "Constant" {
			continue
		}
		if len(n.outs) == 0 {
			return nil, onnxErrf("node %q (%s) has no output", n.name, n.op)
		}
		consumes := false
		for _, in := range n.inputs {
			consumes = consumes || in == cur
		}
		if !consumes {
			return nil, onnxErrf("node %q (%s) does not take the running value %q: the graph is not a simple chain", n.name, n.op, cur)
		}
		switch n.op {
		case "Gemm":
			if n.inputs[0] != cur {
				return nil, onnxErrf("Gemm %q: the data must be input A", n.name)
			}
			if a := n.attrs["transA"]; a.i != 0 {
				return nil, onnxErrf("Gemm %q has transA=1; expected samples as rows", n.name)
			}
			w, err := weightOf(n, 1)
			if err != nil {
				return nil, err
			}
			if len(w.dims) != 2 {
				return nil, onnxErrf("Gemm %q: weight %q has shape %v; expected 2-D", n.name, w.name, w.dims)
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
			flush()
			out, _ := wm.Dims()
			pend = &Layer{Weight: wm, Act: Identity}
			if len(n.inputs) > 2 && n.inputs[2] != "" {
				c, err := weightOf(n, 2)
				if err != nil {
					return nil, err
				}
				bias, err := broadcastBias(c, out, beta)
				if err != nil {
					return nil, onnxErrf("Gemm %q: %v", n.name, err)
				}
				pend.Bias = bias
			}
		case "MatMul":
			if n.inputs[0] != cur || len(n.inputs) != 2 {
				return nil, onnxErrf("MatMul %q: expected the data times a weight", n.name)
			}
			w, err := weightOf(n, 1)
			if err != nil {
				return nil, err
			}
			if len(w.dims) != 2 {
				return nil, onnxErrf("MatMul %q: weight %q has shape %v; expected 2-D (in × out)", n.name, w.name, w.dims)
			}
			flush()
			wm := mat.NewDense(w.dims[0], w.dims[1], append([]float64(nil), w.data...))
			pend = &Layer{Weight: mat.DenseCopyOf(wm.T()), Act: Identity}
		case "Add":
			if len(n.inputs) != 2 {
				return nil, onnxErrf("Add %q needs two inputs", n.name)
			}
			other := 1
			if n.inputs[1] == cur {
				other = 0
			}
			if pend == nil || pend.Act != Identity {
				return nil, onnxErrf("Add %q does not follow a MatMul or Gemm", n.name)
			}
			c, err := weightOf(n, other)
			if err != nil {
				return nil, err
			}
			bias, err := broadcastBias(c, pend.Out(), 1)
			if err != nil {
				return nil, onnxErrf("Add %q: %v", n.name, err)
			}
			if pend.Bias == nil {
				pend.Bias = bias
			} else {
				for i := range bias {
					pend.Bias[i] += bias[i]
				}
			}
		case "Relu":
			if pend == nil {
				return nil, onnxErrf("Relu %q before any Linear layer is not supported", n.name)
			}
			if pend.Act == ReLU {
				return nil, onnxErrf("two Relu nodes in a row (%q)", n.name)
			}
			pend.Act = ReLU
			flush()
		case "Identity", "Dropout":
		case "Flatten":
			if a, ok := n.attrs["axis"]; ok && a.hasI && a.i != 1 {
				return nil, onnxErrf("Flatten %q with axis %d; only axis 1 keeps samples as rows", n.name, a.i)
			}
		default:
			return nil, onnxErrf("unsupported operator %s (node %q); supported: Gemm, MatMul, Add, Relu, Identity, Flatten, Dropout, Constant", n.op, n.name)
		}
		cur = n.outs[0]
	}
	flush()
	if cur != outputs[0] {
		return nil, onnxErrf("the chain of nodes ends at %q but the graph output is %q", cur, outputs[0])
	}
	if len(m.Layers) == 0 {
		return nil, onnxErrf("no Linear layer found")
	}
	if err := m.Validate(); err != nil {
		return nil, onnxErrf("%v", err)
	}
	return m, nil
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

func parseNode(b []byte) (onnxNode, error) {
	fields, err := pbFields(b)
	if err != nil {
		return onnxNode{}, onnxErrf("node: %v", err)
	}
	n := onnxNode{attrs: map[string]onnxAttr{}}
	for _, f := range fields {
		switch f.num {
		case nodeInput, nodeOutput, nodeName, nodeOpType:
			s, err := f.str()
			if err != nil {
				return n, onnxErrf("node: %v", err)
			}
			switch f.num {
			case nodeInput:
				n.inputs = append(n.inputs, s)
			case nodeOutput:
				n.outs = append(n.outs, s)
			case nodeName:
				n.name = s
			default:
				n.op = s
			}
		case nodeAttribute:
			if f.wire != wireBytes {
				return n, onnxErrf("node %q: attribute is not a message", n.name)
			}
			af, err := pbFields(f.b)
			if err != nil {
				return n, onnxErrf("node %q attribute: %v", n.name, err)
			}
			var name string
			var a onnxAttr
			for _, x := range af {
				switch x.num {
				case attrName:
					if name, err = x.str(); err != nil {
						return n, onnxErrf("attribute name: %v", err)
					}
				case attrF:
					if x.wire != wireFixed32 {
						return n, onnxErrf("attribute f has wire type %d", x.wire)
					}
					a.f, a.hasF = float64(math.Float32frombits(uint32(x.v))), true
				case attrI:
					if x.wire != wireVarint {
						return n, onnxErrf("attribute i has wire type %d", x.wire)
					}
					a.i, a.hasI = int64(x.v), true
				case attrT:
					if x.wire != wireBytes {
						return n, onnxErrf("attribute t is not a message")
					}
					t, err := parseTensor(x.b)
					if err != nil {
						return n, err
					}
					a.t = t
				}
			}
			n.attrs[name] = a
		}
	}
	return n, nil
}

func parseTensor(b []byte) (*onnxTensor, error) {
	fields, err := pbFields(b)
	if err != nil {
		return nil, onnxErrf("tensor: %v", err)
	}
	t := &onnxTensor{}
	dtype := 0
	var raw []byte
	var typed []float64
	haveTyped := false
	for _, f := range fields {
		switch f.num {
		case tensorDims:
			ds, err := f.ints()
			if err != nil {
				return nil, onnxErrf("tensor dims: %v", err)
			}
			for _, d := range ds {
				if d < 0 || d > math.MaxInt32 {
					return nil, onnxErrf("tensor dimension %d", d)
				}
				t.dims = append(t.dims, int(d))
			}
		case tensorDataType:
			if f.wire != wireVarint {
				return nil, onnxErrf("tensor data_type has wire type %d", f.wire)
			}
			dtype = int(f.v)
		case tensorName:
			if t.name, err = f.str(); err != nil {
				return nil, onnxErrf("tensor name: %v", err)
			}
		case tensorRawData:
			if f.wire != wireBytes {
				return nil, onnxErrf("tensor raw_data is not bytes")
			}
			raw = f.b
		case tensorFloatData:
			v, err := f.floats32()
			if err != nil {
				return nil, onnxErrf("tensor float_data: %v", err)
			}
			typed, haveTyped = append(typed, v...), true
		case tensorDoubleData:
			v, err := f.floats64()
			if err != nil {
				return nil, onnxErrf("tensor double_data: %v", err)
			}
			typed, haveTyped = append(typed, v...), true
		case tensorInt32Data, tensorInt64Data:
			v, err := f.ints()
			if err != nil {
				return nil, onnxErrf("tensor integer data: %v", err)
			}
			for _, x := range v {
				if f.num == tensorInt32Data && dtype == onnxFloat16 {
					typed = append(typed, half.ToFloat64(uint16(x)))
				} else if f.num == tensorInt32Data {
					typed = append(typed, float64(int32(x)))
				} else {
					typed = append(typed, float64(x))
				}
			}
			haveTyped = true
		case tensorDataLocation:
			if f.wire == wireVarint && f.v == 1 {
				return nil, onnxErrf("tensor %q is stored in an external file; export with the weights inside the model (the default for models under 2 GiB)", t.name)
			}
		}
	}
	count := 1
	for _, d := range t.dims {
		if d != 0 && count > math.MaxInt32/d {
			return nil, onnxErrf("tensor %q: shape %v is too large", t.name, t.dims)
		}
		count *= d
	}
	if raw != nil {
		size := map[int]int{onnxFloat: 4, onnxDouble: 8, onnxFloat16: 2, onnxBFloat16: 2, onnxInt32: 4, onnxInt64: 8}[dtype]
		if size == 0 {
			return nil, onnxErrf("tensor %q has data type %d; supported are float, double, float16, bfloat16, int32, int64", t.name, dtype)
		}
		if len(raw) != count*size {
			return nil, onnxErrf("tensor %q: shape %v needs %d bytes of raw data, found %d", t.name, t.dims, count*size, len(raw))
		}
		t.data = make([]float64, count)
		for i := range t.data {
			switch dtype {
			case onnxFloat:
				t.data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
			case onnxDouble:
				t.data[i] = math.Float64frombits(uint64(binary.LittleEndian.Uint32(raw[8*i:])) | uint64(binary.LittleEndian.Uint32(raw[8*i+4:]))<<32)
			case onnxFloat16:
				t.data[i] = half.ToFloat64(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
			case onnxBFloat16:
				t.data[i] = float64(math.Float32frombits((uint32(raw[2*i]) | uint32(raw[2*i+1])<<8) << 16))
			case onnxInt32:
				t.data[i] = float64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			case onnxInt64:
				t.data[i] = float64(int64(uint64(binary.LittleEndian.Uint32(raw[8*i:])) | uint64(binary.LittleEndian.Uint32(raw[8*i+4:]))<<32))
			}
		}
	} else if haveTyped || count == 0 {
		if len(typed) != count {
			return nil, onnxErrf("tensor %q: shape %v needs %d values, found %d", t.name, t.dims, count, len(typed))
		}
		t.data = typed
	} else {
		return nil, onnxErrf("tensor %q holds no data", t.name)
	}
	for i, v := range t.data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, onnxErrf("tensor %q element %d is %v", t.name, i, v)
		}
	}
	return t, nil
}
