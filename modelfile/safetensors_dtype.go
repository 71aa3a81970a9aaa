package modelfile

import (
	"encoding/binary"
	"math"

	"github.com/relurec/relurec/internal/half"
)

// The element types of safetensors files: their sizes, their decoding to
// float64, and which of them are floating point.

// dtypeSize gives the bytes per element of the dtypes we decode.
var dtypeSize = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1,
}

// decodeTensor converts count little-endian elements of dtype to float64.
func decodeTensor(dtype string, b []byte, count int) []float64 {
	out := make([]float64, count)
	le := binary.LittleEndian
	for i := range out {
		switch dtype {
		case "F64":
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		case "F32":
			out[i] = float64(math.Float32frombits(le.Uint32(b[4*i:])))
		case "F16":
			out[i] = half.ToFloat64(le.Uint16(b[2*i:]))
		case "BF16":
			out[i] = half.BFloat16ToFloat64(le.Uint16(b[2*i:]))
		case "I64":
			out[i] = float64(int64(le.Uint64(b[8*i:])))
		case "I32":
			out[i] = float64(int32(le.Uint32(b[4*i:])))
		case "I16":
			out[i] = float64(int16(le.Uint16(b[2*i:])))
		case "I8":
			out[i] = float64(int8(b[i]))
		case "U64":
			out[i] = float64(le.Uint64(b[8*i:]))
		case "U32":
			out[i] = float64(le.Uint32(b[4*i:]))
		case "U16":
			out[i] = float64(le.Uint16(b[2*i:]))
		case "U8":
			out[i] = float64(b[i])
		case "BOOL":
			if b[i] != 0 {
				out[i] = 1
			}
		}
	}
	return out
}

// isFloat reports whether dtype is one of the floating-point dtypes.
func isFloat(dtype string) bool {
	return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16"
}
