package modelfile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/relurec/relurec/errs"
)

// A minimal reader of the protobuf wire format (https://protobuf.dev/
// programming-guides/encoding/), just enough for the ONNX messages an MLP
// needs. We do not depend on a protobuf library or generated code: the
// reader walks the bytes of a message, yields (field number, wire type,
// value) triples, and skips every field the caller does not ask for. Every
// length is checked against the bytes that remain before it is used, so a
// corrupt file gives an error, never a panic or a huge allocation (fuzzed in
// FuzzReadONNX).

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

var errProto = errs.New("malformed protobuf", nil)

// pbField is one field of a message. For wireBytes, b holds the payload (a
// sub-slice of the message, not a copy); for the numeric wire types, v holds
// the raw value.
type pbField struct {
	num  int
	wire int
	v    uint64
	b    []byte
}

// pbFields decodes the top-level fields of one message.
func pbFields(msg []byte) ([]pbField, error) {
	var out []pbField
	for off := 0; off < len(msg); {
		key, n := binary.Uvarint(msg[off:])
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad field key at byte %d", errProto, off)
		}
		off += n
		f := pbField{num: int(key >> 3), wire: int(key & 7)}
		if key>>3 == 0 || key>>3 > math.MaxInt32 {
			return nil, fmt.Errorf("%w: field number %d", errProto, key>>3)
		}
		switch f.wire {
		case wireVarint:
			v, n := binary.Uvarint(msg[off:])
			if n <= 0 {
				return nil, fmt.Errorf("%w: bad varint in field %d", errProto, f.num)
			}
			f.v, off = v, off+n
		case wireFixed64:
			if len(msg)-off < 8 {
				return nil, fmt.Errorf("%w: truncated fixed64 in field %d", errProto, f.num)
			}
			f.v, off = binary.LittleEndian.Uint64(msg[off:]), off+8
		case wireFixed32:
			if len(msg)-off < 4 {
				return nil, fmt.Errorf("%w: truncated fixed32 in field %d", errProto, f.num)
			}
			f.v, off = uint64(binary.LittleEndian.Uint32(msg[off:])), off+4
		case wireBytes:
			l, n := binary.Uvarint(msg[off:])
			if n <= 0 {
				return nil, fmt.Errorf("%w: bad length in field %d", errProto, f.num)
			}
			off += n
			if l > uint64(len(msg)-off) {
				return nil, fmt.Errorf("%w: field %d claims %d bytes but %d remain", errProto, f.num, l, len(msg)-off)
			}
			f.b, off = msg[off:off+int(l)], off+int(l)
		default:
			return nil, fmt.Errorf("%w: unsupported wire type %d in field %d", errProto, f.wire, f.num)
		}
		out = append(out, f)
	}
	return out, nil
}

// pbInts decodes a repeated integer field that may be packed (wireBytes
// holding varints) or not (one varint).
func (f pbField) ints() ([]int64, error) {
	switch f.wire {
	case wireVarint:
		return []int64{int64(f.v)}, nil
	case wireBytes:
		var out []int64
		for off := 0; off < len(f.b); {
			v, n := binary.Uvarint(f.b[off:])
			if n <= 0 {
				return nil, fmt.Errorf("%w: bad packed varint in field %d", errProto, f.num)
			}
			out = append(out, int64(v))
			off += n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: field %d has wire type %d, expected an integer", errProto, f.num, f.wire)
}

// floats32 decodes a repeated float field, packed or not.
func (f pbField) floats32() ([]float64, error) {
	switch f.wire {
	case wireFixed32:
		return []float64{float64(math.Float32frombits(uint32(f.v)))}, nil
	case wireBytes:
		if len(f.b)%4 != 0 {
			return nil, fmt.Errorf("%w: packed floats of %d bytes", errProto, len(f.b))
		}
		out := make([]float64, len(f.b)/4)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(f.b[4*i:])))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: field %d has wire type %d, expected floats", errProto, f.num, f.wire)
}

// floats64 decodes a repeated double field, packed or not.
func (f pbField) floats64() ([]float64, error) {
	switch f.wire {
	case wireFixed64:
		return []float64{math.Float64frombits(f.v)}, nil
	case wireBytes:
		if len(f.b)%8 != 0 {
			return nil, fmt.Errorf("%w: packed doubles of %d bytes", errProto, len(f.b))
		}
		out := make([]float64, len(f.b)/8)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(f.b[8*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: field %d has wire type %d, expected doubles", errProto, f.num, f.wire)
}

// str returns a string field.
func (f pbField) str() (string, error) {
	if f.wire != wireBytes {
		return "", fmt.Errorf("%w: field %d has wire type %d, expected a string", errProto, f.num, f.wire)
	}
	return string(f.b), nil
}
