package half

import (
	"math"
	"testing"
)

func TestToFloat64(t *testing.T) {
	cases := map[uint16]float64{
		0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: math.Ldexp(1, -24), 0x3555: 0.333251953125,
		0x7c00: math.Inf(1), 0xfc00: math.Inf(-1),
	}
	for h, want := range cases {
		if got := ToFloat64(h); got != want {
			t.Errorf("ToFloat64(%#04x) = %v, want %v", h, got, want)
		}
	}
	if !math.IsNaN(ToFloat64(0x7e00)) {
		t.Error("0x7e00 should be NaN")
	}
}
