package modelfile

import (
	"errors"
	"fmt"
	"io"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/boundedio"
	"github.com/relurec/relurec/nn"
)

// Reading ONNX: this file has the entry points, the error type and the ONNX
// field numbers; onnx_graph.go turns a GraphProto into an MLP,
// onnx_tensor.go decodes NodeProto and TensorProto messages, and
// protobuf.go is the wire-format reader under them.

// ErrONNX marks an ONNX file that is corrupt or does not describe an MLP this
// package can import. Errors wrapping it also match ErrModelFile, so callers
// that handle bad model files in general need no change.
var ErrONNX = errs.New("invalid or unsupported ONNX model; expected an nn.Sequential of Linear and ReLU modules exported by torch.onnx.export (Gemm/MatMul/Add/Relu nodes, weights inside the file)", errs.ErrInput)

// onnxError wraps ErrONNX (so errs.ErrInput) and also reports itself as
// ErrModelFile.
// A non-nil also (ErrNotMLP) is matched too and replaces ErrONNX's
// message.
type onnxError struct {
	msg  string
	also error
}

func (e *onnxError) Unwrap() error { return ErrONNX }

func (e *onnxError) Error() string {
	if e.also != nil {
		return "onnx: " + e.msg + ": " + e.also.Error()
	}
	return "onnx: " + e.msg + ": " + ErrONNX.Error()
}

func (e *onnxError) Is(target error) bool {
	return target == ErrModelFile || e.also != nil && errors.Is(e.also, target)
}

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

	attrS    = 4
	attrInts = 8
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
	// dtype is the TensorProto data type read (onnxFloat, onnxInt64, ...).
	dtype int
}

type onnxAttr struct {
	f    float64
	i    int64
	s    string
	ints []int64
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
func LoadONNX(path string) (*nn.MLP, error) {
	var m *nn.MLP
	err := readFile(path, func(r io.Reader) (err error) { m, err = ReadONNX(r); return err })
	return m, err
}

// ReadONNX reads an ONNX model from r; see LoadONNX. A convolutional
// network is refused with an error wrapping ErrNotMLP (ReadONNXNetwork and
// ReadCNNONNX read it).
func ReadONNX(r io.Reader) (*nn.MLP, error) {
	g, err := readONNXGraph(r)
	if err != nil {
		return nil, err
	}
	if n, ok := g.convNode(); ok {
		return nil, &onnxError{msg: fmt.Sprintf("node %q is a %s", n.name, n.op), also: ErrNotMLP}
	}
	return mlpFromGraph(g)
}

// readONNXGraph reads a ModelProto from r and returns its graph, the
// Constant nodes added to the weights.
func readONNXGraph(r io.Reader) (*onnxGraph, error) {
	b, over, err := boundedio.ReadAll(r, maxONNXBytes)
	if err != nil {
		return nil, err
	}
	if over {
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
	opset := 0
	for _, f := range model {
		if f.num == modelGraph && f.wire == wireBytes {
			graph = f.b
		}
		if f.num == modelOpsetImport && f.wire == wireBytes {
			domain := ""
			for _, d := range pbAll(f.b, opsetDomain) {
				domain, _ = d.str()
			}
			for _, v := range pbAll(f.b, opsetVersion) {
				if n, ok := v.int(); ok && (domain == "" || domain == "ai.onnx") && n > 0 && n < 1000 {
					opset = int(n)
				}
			}
		}
	}
	if graph == nil {
		return nil, onnxErrf("the model has no graph")
	}
	g, err := readGraph(graph)
	if err != nil {
		return nil, err
	}
	g.addConstants()
	g.opset = opset
	return g, nil
}
