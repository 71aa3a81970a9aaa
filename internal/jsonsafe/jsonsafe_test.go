package jsonsafe

import (
	"encoding/json"
	"math"
	"testing"
)

func TestFinite(t *testing.T) {
	type inner struct {
		A float64 `json:"a"`
		B float64 `json:"b,omitempty"`
		C float64 `json:"-"`
	}
	v := struct {
		X  []float64          `json:"x"`
		In inner              `json:"in"`
		M  map[string]float64 `json:"m"`
		P  *float64           `json:"p"`
	}{X: []float64{1, math.NaN(), math.Inf(-1)}, In: inner{A: math.Inf(1), C: 3}, M: map[string]float64{"k": math.NaN()}}
	if _, err := json.Marshal(v); err == nil {
		t.Fatal("encoding/json accepted NaN: the test premise is wrong")
	}
	b, err := json.Marshal(Finite(v))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"x":[1,null,null],"in":{"a":null},"m":{"k":null},"p":null}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
