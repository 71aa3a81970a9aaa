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

func TestBFloat16ToFloat64(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float64
	}{{0x3f80, 1}, {0xc000, -2}, {0x0000, 0}, {0x3fc0, 1.5}, {0x7f80, math.Inf(1)}} {
		if got := BFloat16ToFloat64(c.h); got != c.want {
			t.Errorf("BFloat16ToFloat64(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
	if !math.IsNaN(BFloat16ToFloat64(0x7fc0)) {
		t.Error("0x7fc0 is NaN")
	}
}
