package modelfile

import (
	"math"

	"github.com/relurec/relurec/internal/half"
)

// parseNode decodes a NodeProto: its inputs, outputs, name, operator and
// attributes.
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
			name, a, err := parseAttribute(n.name, f.b)
			if err != nil {
				return n, err
			}
			n.attrs[name] = a
		}
	}
	return n, nil
}

// parseAttribute decodes an AttributeProto of node nodeName: its name and
// the float, integer, string, integer list or tensor value our nodes use.
func parseAttribute(nodeName string, b []byte) (string, onnxAttr, error) {
	var name string
	var a onnxAttr
	af, err := pbFields(b)
	if err != nil {
		return name, a, onnxErrf("node %q attribute: %v", nodeName, err)
	}
	for _, x := range af {
		switch x.num {
		case attrName:
			if name, err = x.str(); err != nil {
				return name, a, onnxErrf("attribute name: %v", err)
			}
		case attrF:
			if x.wire != wireFixed32 {
				return name, a, onnxErrf("attribute f has wire type %d", x.wire)
			}
			a.f, a.hasF = float64(math.Float32frombits(uint32(x.v))), true
		case attrI:
			if x.wire != wireVarint {
				return name, a, onnxErrf("attribute i has wire type %d", x.wire)
			}
			a.i, a.hasI = int64(x.v), true
		case attrS:
			if a.s, err = x.str(); err != nil {
				return name, a, onnxErrf("node %q attribute s: %v", nodeName, err)
			}
		case attrInts:
			v, err := x.ints()
			if err != nil {
				return name, a, onnxErrf("node %q attribute ints: %v", nodeName, err)
			}
			a.ints = append(a.ints, v...)
		case attrT:
			if x.wire != wireBytes {
				return name, a, onnxErrf("attribute t is not a message")
			}
			t, err := parseTensor(x.b)
			if err != nil {
				return name, a, err
			}
			a.t = t
		}
	}
	return name, a, nil
}

// onnxDTypes maps the ONNX TensorProto data types we decode from raw_data
// to the safetensors dtype with the same little-endian layout.
var onnxDTypes = map[int]string{
	onnxFloat: "F32", onnxDouble: "F64", onnxFloat16: "F16", onnxBFloat16: "BF16",
	onnxInt32: "I32", onnxInt64: "I64",
}

// tensorFields collects a TensorProto's fields as they arrive.
type tensorFields struct {
	t         *onnxTensor
	dtype     int
	raw       []byte
	typed     []float64
	haveTyped bool
}

// parseTensor decodes a TensorProto whose data is inside the message
// (raw_data or the typed repeated fields) and checks that the data fills
// the shape and is finite.
func parseTensor(b []byte) (*onnxTensor, error) {
	fields, err := pbFields(b)
	if err != nil {
		return nil, onnxErrf("tensor: %v", err)
	}
	tf := tensorFields{t: &onnxTensor{}}
	for _, f := range fields {
		if err := tf.add(f); err != nil {
			return nil, err
		}
	}
	t := tf.t
	t.dtype = tf.dtype
	count := 1
	for _, d := range t.dims {
		if d != 0 && count > math.MaxInt32/d {
			return nil, onnxErrf("tensor %q: shape %v is too large", t.name, t.dims)
		}
		count *= d
	}
	if t.data, err = tf.values(count); err != nil {
		return nil, err
	}
	for i, v := range t.data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, onnxErrf("tensor %q element %d is %v", t.name, i, v)
		}
	}
	return t, nil
}

// add takes one field of the TensorProto.
func (tf *tensorFields) add(f pbField) error {
	t := tf.t
	var err error
	switch f.num {
	case tensorDims:
		ds, err := f.ints()
		if err != nil {
			return onnxErrf("tensor dims: %v", err)
		}
		for _, d := range ds {
			if d < 0 || d > math.MaxInt32 {
				return onnxErrf("tensor dimension %d", d)
			}
			t.dims = append(t.dims, int(d))
		}
	case tensorDataType:
		if f.wire != wireVarint {
			return onnxErrf("tensor data_type has wire type %d", f.wire)
		}
		tf.dtype = int(f.v)
	case tensorName:
		if t.name, err = f.str(); err != nil {
			return onnxErrf("tensor name: %v", err)
		}
	case tensorRawData:
		if f.wire != wireBytes {
			return onnxErrf("tensor raw_data is not bytes")
		}
		tf.raw = f.b
	case tensorFloatData:
		v, err := f.floats32()
		if err != nil {
			return onnxErrf("tensor float_data: %v", err)
		}
		tf.typed, tf.haveTyped = append(tf.typed, v...), true
	case tensorDoubleData:
		v, err := f.floats64()
		if err != nil {
			return onnxErrf("tensor double_data: %v", err)
		}
		tf.typed, tf.haveTyped = append(tf.typed, v...), true
	case tensorInt32Data, tensorInt64Data:
		v, err := f.ints()
		if err != nil {
			return onnxErrf("tensor integer data: %v", err)
		}
		for _, x := range v {
			if f.num == tensorInt32Data && tf.dtype == onnxFloat16 {
				tf.typed = append(tf.typed, half.ToFloat64(uint16(x)))
			} else if f.num == tensorInt32Data {
				tf.typed = append(tf.typed, float64(int32(x)))
			} else {
				tf.typed = append(tf.typed, float64(x))
			}
		}
		tf.haveTyped = true
	case tensorDataLocation:
		if f.wire == wireVarint && f.v == 1 {
			return onnxErrf("tensor %q is stored in an external file; export with the weights inside the model (the default for models under 2 GiB)", t.name)
		}
	}
	return nil
}

// values returns the tensor's count values: from raw_data when present,
// else from the typed fields.
func (tf *tensorFields) values(count int) ([]float64, error) {
	t := tf.t
	switch {
	case tf.raw != nil:
		dtype, ok := onnxDTypes[tf.dtype]
		if !ok {
			return nil, onnxErrf("tensor %q has data type %d; supported are float, double, float16, bfloat16, int32, int64", t.name, tf.dtype)
		}
		size := dtypeSize[dtype]
		if len(tf.raw) != count*size {
			return nil, onnxErrf("tensor %q: shape %v needs %d bytes of raw data, found %d", t.name, t.dims, count*size, len(tf.raw))
		}
		return decodeTensor(dtype, tf.raw, count), nil
	case tf.haveTyped || count == 0:
		if len(tf.typed) != count {
			return nil, onnxErrf("tensor %q: shape %v needs %d values, found %d", t.name, t.dims, count, len(tf.typed))
		}
		return tf.typed, nil
	default:
		return nil, onnxErrf("tensor %q holds no data", t.name)
	}
}
