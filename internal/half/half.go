// Package half converts 16-bit floats: IEEE 754 binary16, the float16 of
// numpy (.npy '<f2'), safetensors (F16) and ONNX, and bfloat16
// (safetensors BF16, ONNX BFLOAT16).
package half

import "math"

// ToFloat64 converts an IEEE 754 binary16 value exactly.
func ToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	default:
		return sign * math.Ldexp(1+frac/1024, exp-15)
	}
}

// BFloat16ToFloat64 converts a bfloat16 value (the top 16 bits of a
// float32) exactly.
func BFloat16ToFloat64(h uint16) float64 {
	return float64(math.Float32frombits(uint32(h) << 16))
}
