package modelfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// buildFile assembles a safetensors file from a literal header and data.
func buildFile(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func le32(vs ...float32) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		binary.Write(&b, binary.LittleEndian, math.Float32bits(v))
	}
	return b.Bytes()
}

func TestWriteSafetensorsLayout(t *testing.T) {
	// Spec: 8-byte LE header size, compact JSON with tensors sorted by name
	// and contiguous offsets, padded with spaces to a multiple of 8, then the
	// raw little-endian data in the same order.
	var b bytes.Buffer
	err := WriteSafetensors(&b, map[string]Tensor{
		"b": {Shape: []int{2}, F64: []float64{1, 2}},
		"a": {Shape: []int{1, 2}, F64: []float64{3, -0.5}},
	}, map[string]string{"k": "v<>"}, "F32")
	if err != nil {
		t.Fatal(err)
	}
	json := `{"__metadata__":{"k":"v<>"},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`
	for len(json)%8 != 0 {
		json += " "
	}
	want := buildFile(json, le32(3, -0.5, 1, 2))
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("layout:\n got %q\nwant %q", b.Bytes(), want)
	}

	// F64, no metadata: no __metadata__ key at all.
	b.Reset()
	if err := WriteSafetensors(&b, map[string]Tensor{"x": {Shape: []int{}, F64: []float64{1.5}}}, nil, ""); err != nil {
		t.Fatal(err)
	}
	hdr := `{"x":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	var d [8]byte
	binary.LittleEndian.PutUint64(d[:], math.Float64bits(1.5))
	if want := buildFile(hdr, d[:]); !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("layout:\n got %q\nwant %q", b.Bytes(), want)
	}
}

func TestWriteSafetensorsErrors(t *testing.T) {
	var b bytes.Buffer
	cases := map[string]struct {
		tensors map[string]Tensor
		dtype   string
	}{
		"dtype":     {map[string]Tensor{"a": {Shape: []int{1}, F64: []float64{1}}}, "F16"},
		"count":     {map[string]Tensor{"a": {Shape: []int{2}, F64: []float64{1}}}, "F64"},
		"reserved":  {map[string]Tensor{"__metadata__": {Shape: []int{1}, F64: []float64{1}}}, "F64"},
		"overflows": {map[string]Tensor{"a": {Shape: []int{1}, F64: []float64{1e300}}}, "F32"},
	}
	for name, tc := range cases {
		if err := WriteSafetensors(&b, tc.tensors, nil, tc.dtype); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadSafetensorsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tensors := map[string]Tensor{
		"w":      {Shape: []int{3, 4}, F64: testutil.RandVec(rng, 12)},
		"v":      {Shape: []int{5}, F64: testutil.RandVec(rng, 5)},
		"s":      {Shape: []int{}, F64: []float64{math.Pi}},
		"e":      {Shape: []int{0, 3}, F64: []float64{}},
		"ünï\"q": {Shape: []int{1}, F64: []float64{-0.0}},
	}
	meta := map[string]string{"a": "1", "json": `{"x":[1,2]}`}
	for _, dtype := range []string{"F64", "F32"} {
		var b bytes.Buffer
		if err := WriteSafetensors(&b, tensors, meta, dtype); err != nil {
			t.Fatal(err)
		}
		got, gotMeta, err := ReadSafetensors(&b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tensors) || gotMeta["json"] != meta["json"] || gotMeta["a"] != "1" {
			t.Fatalf("%s: got %d tensors, meta %v", dtype, len(got), gotMeta)
		}
		for name, want := range tensors {
			g := got[name]
			if g.DType != dtype || len(g.Shape) != len(want.Shape) || len(g.F64) != len(want.F64) {
				t.Fatalf("%s %s: got %+v", dtype, name, g)
			}
			for i, v := range want.F64 {
				if dtype == "F64" && math.Float64bits(g.F64[i]) != math.Float64bits(v) {
					t.Fatalf("F64 %s[%d]: %v != %v", name, i, g.F64[i], v)
				}
				if dtype == "F32" && g.F64[i] != float64(float32(v)) {
					t.Fatalf("F32 %s[%d]: %v != float32(%v)", name, i, g.F64[i], v)
				}
			}
		}
	}
}

func TestReadSafetensorsHalfTypes(t *testing.T) {
	// F16: 1.0 = 0x3c00, -2.5 = 0xc100, 2^-24 = 0x0001 (subnormal);
	// BF16: 1.0 = 0x3f80, -0.15625 = 0xbe20; I64 -3; BOOL.
	hdr := `{"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},"bf":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]},` +
		`"i":{"dtype":"I64","shape":[1],"data_offsets":[10,18]},"t":{"dtype":"BOOL","shape":[2],"data_offsets":[18,20]}}`
	data := []byte{0x00, 0x3c, 0x00, 0xc1, 0x01, 0x00, 0x80, 0x3f, 0x20, 0xbe, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0}
	got, _, err := ReadSafetensors(bytes.NewReader(buildFile(hdr, data)))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, want ...float64) {
		for i, w := range want {
			if got[name].F64[i] != w {
				t.Errorf("%s[%d] = %v, want %v", name, i, got[name].F64[i], w)
			}
		}
	}
	check("h", 1, -2.5, math.Ldexp(1, -24))
	check("bf", 1, -0.15625)
	check("i", -3)
	check("t", 1, 0)
}

func TestReadSafetensorsCorrupt(t *testing.T) {
	var good bytes.Buffer
	WriteSafetensors(&good, map[string]Tensor{
		"0.weight": {Shape: []int{2, 2}, F64: []float64{1, 2, 3, 4}},
		"2.weight": {Shape: []int{1, 2}, F64: []float64{5, 6}},
	}, map[string]string{"a": "b"}, "F32")
	g := good.Bytes()
	for n := 0; n < len(g); n++ {
		if _, _, err := ReadSafetensors(bytes.NewReader(g[:n])); !errors.Is(err, ErrModelFile) {
			t.Fatalf("prefix of %d bytes: got %v, want ErrModelFile", n, err)
		}
	}
	w := func(h string) []byte { return buildFile(h, make([]byte, 8)) }
	bad := map[string][]byte{
		"trailing":     append(append([]byte(nil), g...), 0),
		"huge header":  append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, g[8:]...),
		"not json":     w(`{"a":`),
		"not object":   w(`[1,2]   `),
		"no dtype":     w(`{"a":{"shape":[2],"data_offsets":[0,8]}}`),
		"bad dtype":    w(`{"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}}`),
		"bad offsets":  w(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`),
		"reversed":     w(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`),
		"size":         w(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`),
		"huge shape":   w(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`),
		"overflow":     w(`{"a":{"dtype":"F64","shape":[2147483647,2147483647,2147483647,4],"data_offsets":[0,8]}}`),
		"neg dim":      w(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`),
		"gap":          w(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`),
		"overlap":      w(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`),
		"beyond file":  w(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`),
		"bad metadata": w(`{"__metadata__":{"a":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`),
		"tiny header":  {1, 0, 0, 0, 0, 0, 0, 0, '{'},
	}
	for name, b := range bad {
		if _, _, err := ReadSafetensors(bytes.NewReader(b)); !errors.Is(err, ErrModelFile) {
			t.Errorf("%s: got %v, want ErrModelFile", name, err)
		}
	}
}

func FuzzReadSafetensors(f *testing.F) {
	var b bytes.Buffer
	WriteModel(&b, &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6}), Bias: []float64{1, 2}, Act: nn.ReLU},
		{Weight: mat.NewDense(1, 2, []float64{7, 8}), Act: nn.Identity},
	}}, map[string]string{"k": "v"}, "F32")
	f.Add(b.Bytes())
	f.Add(buildFile(`{"0.weight":{"dtype":"F16","shape":[1,1],"data_offsets":[0,2]}}`, []byte{0, 0x3c}))
	f.Add(buildFile(`{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}`, []byte{1, 2, 3, 4, 5}))
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, data []byte) {
		tensors, _, err := ReadSafetensors(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrModelFile) {
				t.Fatalf("error does not wrap ErrModelFile: %v", err)
			}
			return
		}
		for name, tt := range tensors {
			n := 1
			for _, s := range tt.Shape {
				n *= s
			}
			if n != len(tt.F64) {
				t.Fatalf("%s: shape %v but %d values", name, tt.Shape, len(tt.F64))
			}
		}
		// The model builder must not panic on whatever the reader accepts.
		if m, _, err := ReadModel(bytes.NewReader(data)); err == nil {
			if err := m.Validate(); err != nil {
				t.Fatalf("ReadModel returned an invalid model: %v", err)
			}
			m.Forward(mat.NewDense(1, m.In(), nil))
		} else if !errors.Is(err, ErrModelFile) {
			t.Fatalf("ReadModel error does not wrap ErrModelFile: %v", err)
		}
	})
}

func TestSaveLoadModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	// ReLU, factored (identity) layer, ReLU, final layer: indices 0, 2, 3, 5.
	m := randMLP(rng, []int{6, 8, 3, 7, 2}, []nn.Activation{nn.ReLU, nn.Identity, nn.ReLU, nn.Identity})
	dir := t.TempDir()
	x := testutil.RandDense(rng, 50, 6)
	for _, dtype := range []string{"", "F64", "F32"} {
		p := filepath.Join(dir, "m"+dtype+".safetensors")
		if err := SaveModel(p, m, map[string]string{"route": "test", "format": "ignored"}, dtype); err != nil {
			t.Fatal(err)
		}
		got, meta, err := LoadModel(p)
		if err != nil {
			t.Fatal(err)
		}
		if meta["route"] != "test" || meta["format"] != "pt" || meta[MetaArchitecture] == "" {
			t.Fatalf("metadata %v", meta)
		}
		tensors, _, _ := ReadSafetensors(mustOpen(t, p))
		for _, k := range []string{"0.weight", "2.weight", "2.bias", "3.weight", "5.weight", "5.bias"} {
			if _, ok := tensors[k]; !ok {
				t.Fatalf("%s missing from %v", k, keys(tensors))
			}
		}
		if len(tensors) != 6 {
			t.Fatalf("tensors %v", keys(tensors))
		}
		for i, l := range got.Layers {
			if l.Act != m.Layers[i].Act || (l.Bias == nil) != (m.Layers[i].Bias == nil) {
				t.Fatalf("layer %d: act %v bias %v", i, l.Act, l.Bias != nil)
			}
		}
		d := testutil.MaxRelDiff(got.Forward(x), m.Forward(x))
		if dtype == "F32" {
			if d > 1e-6 || d == 0 {
				t.Fatalf("F32 round trip deviates by %g, want (0, 1e-6]", d)
			}
		} else if d != 0 {
			t.Fatalf("F64 round trip is not exact: %g", d)
		}
	}
	// A ReLU after the last layer survives thanks to the metadata.
	m.Layers[3].Act = nn.ReLU
	p := filepath.Join(dir, "lastrelu.safetensors")
	if err := SaveModel(p, m, nil, ""); err != nil {
		t.Fatal(err)
	}
	if got, _, err := LoadModel(p); err != nil || got.Layers[3].Act != nn.ReLU {
		t.Fatalf("last ReLU: %v", err)
	}

	// Invalid models are refused before any file is written.
	bad := &nn.MLP{Layers: []nn.Layer{{Weight: mat.NewDense(1, 1, []float64{math.NaN()}), Act: nn.ReLU}}}
	q := filepath.Join(dir, "bad.safetensors")
	if err := SaveModel(q, bad, nil, ""); err == nil {
		t.Fatal("NaN model saved")
	}
	if _, err := os.Stat(q); !os.IsNotExist(err) {
		t.Fatal("file left behind after a failed save")
	}
	if _, _, err := LoadModel(filepath.Join(dir, "none.safetensors")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func mustOpen(t *testing.T, p string) *os.File {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func keys(m map[string]Tensor) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// torchFile writes tensors as PyTorch's save_file would for a state_dict:
// no relurec metadata (only "format": "pt").
func torchFile(t *testing.T, tensors map[string]Tensor) []byte {
	var b bytes.Buffer
	if err := WriteSafetensors(&b, tensors, map[string]string{"format": "pt"}, "F32"); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestLoadWithoutMetadata(t *testing.T) {
	w := func(r, c int) Tensor { return Tensor{Shape: []int{r, c}, F64: make([]float64, r*c)} }
	v := func(n int) Tensor { return Tensor{Shape: []int{n}, F64: make([]float64, n)} }

	// Sequential(Linear(4,8), ReLU, Linear(8,3,bias=False), Linear(3,2)).
	m, _, err := ReadModel(bytes.NewReader(torchFile(t, map[string]Tensor{
		"0.weight": w(8, 4), "0.bias": v(8), "2.weight": w(3, 8), "3.weight": w(2, 3), "3.bias": v(2),
	})))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 3 || m.Layers[0].Act != nn.ReLU || m.Layers[1].Act != nn.Identity || m.Layers[2].Act != nn.Identity ||
		m.Layers[1].Bias != nil || len(m.Layers[2].Bias) != 2 || m.In() != 4 || m.Out() != 2 {
		t.Fatalf("inferred %+v", m.Layers)
	}
	// Keys under a common prefix (a wrapper module's attribute).
	if _, _, err := ReadModel(bytes.NewReader(torchFile(t, map[string]Tensor{"net.0.weight": w(8, 4), "net.2.weight": w(1, 8)}))); err != nil {
		t.Fatalf("prefixed keys: %v", err)
	}

	errs := map[string]struct {
		tensors map[string]Tensor
		msg     string
	}{
		"chain":         {map[string]Tensor{"0.weight": w(8, 4), "2.weight": w(1, 7)}, "layer 2.weight takes 7 inputs but 0.weight gives 8 outputs"},
		"bias length":   {map[string]Tensor{"0.weight": w(8, 4), "0.bias": v(7)}, "0.bias has shape [7]"},
		"bias alone":    {map[string]Tensor{"0.weight": w(8, 4), "2.bias": v(1)}, "2.bias has no matching weight 2.weight"},
		"gap":           {map[string]Tensor{"0.weight": w(8, 4), "3.weight": w(1, 8)}, "3 apart"},
		"first":         {map[string]Tensor{"1.weight": w(8, 4)}, "expected 0.weight"},
		"other key":     {map[string]Tensor{"0.weight": w(8, 4), "bn.running_mean": v(8)}, `"bn.running_mean" is not a Linear parameter`},
		"prefixes":      {map[string]Tensor{"a.0.weight": w(8, 4), "b.2.weight": w(1, 8)}, "prefix"},
		"1-D weight":    {map[string]Tensor{"0.weight": v(4)}, "expected a non-empty 2-D"},
		"empty":         {map[string]Tensor{}, "no tensors"},
		"zero-size dim": {map[string]Tensor{"0.weight": w(0, 4)}, "non-empty"},
	}
	for name, tc := range errs {
		_, _, err := ReadModel(bytes.NewReader(torchFile(t, tc.tensors)))
		if !errors.Is(err, ErrModelFile) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want ErrModelFile containing %q", name, err, tc.msg)
		}
	}
	// Integer weights are refused (built by hand: our writer only does floats).
	hdr := `{"0.weight":{"dtype":"I32","shape":[1,1],"data_offsets":[0,4]}}`
	if _, _, err := ReadModel(bytes.NewReader(buildFile(hdr, make([]byte, 4)))); !errors.Is(err, ErrModelFile) || !strings.Contains(err.Error(), "floating-point") {
		t.Errorf("int weight: %v", err)
	}
	// NaN weights are refused.
	nanW := Tensor{Shape: []int{1, 1}, F64: []float64{math.NaN()}}
	if _, _, err := ReadModel(bytes.NewReader(torchFile(t, map[string]Tensor{"0.weight": nanW}))); !errors.Is(err, ErrModelFile) || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN weight: %v", err)
	}
}

func TestLoadArchitectureMismatch(t *testing.T) {
	w := func(r, c int) Tensor { return Tensor{Shape: []int{r, c}, F64: make([]float64, r*c)} }
	arch := func(a []archLayer) map[string]string {
		b, _ := json.Marshal(a)
		return map[string]string{MetaArchitecture: string(b)}
	}
	cases := map[string]struct {
		meta map[string]string
		msg  string
	}{
		"indices":    {arch([]archLayer{{4, 8, false, nn.Identity}, {8, 1, false, nn.Identity}}), "indices [0 1] but the file holds them at [0 2]"},
		"shape":      {arch([]archLayer{{5, 8, false, nn.ReLU}, {8, 1, false, nn.Identity}}), "declared in=5"},
		"activation": {arch([]archLayer{{4, 8, false, "tanh"}, {8, 1, false, nn.Identity}}), "unknown activation"},
		"json":       {map[string]string{MetaArchitecture: "[{"}, "not a JSON list"},
	}
	for name, tc := range cases {
		var b bytes.Buffer
		WriteSafetensors(&b, map[string]Tensor{"0.weight": w(8, 4), "2.weight": w(1, 8)}, tc.meta, "F64")
		_, _, err := ReadModel(&b)
		if !errors.Is(err, ErrModelFile) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want ErrModelFile containing %q", name, err, tc.msg)
		}
	}
}

func TestModelFileActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	x := testutil.RandDense(rng, 40, 5)
	dir := t.TempDir()
	for _, act := range []nn.Activation{nn.RectPow(2), nn.RectPow(0.5), nn.RectPow(3), nn.RectExp} {
		m := nn.NewTwoLayerAct(testutil.RandDense(rng, 4, 5), testutil.RandDense(rng, 3, 4), act)
		p := filepath.Join(dir, string(act)+".safetensors")
		if err := SaveModel(p, m, nil, ""); err != nil {
			t.Fatal(err)
		}
		got, meta, err := LoadModel(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Layers[0].Act != act || got.Layers[1].Act != nn.Identity {
			t.Fatalf("%s: loaded activations %s, %s", act, got.Layers[0].Act, got.Layers[1].Act)
		}
		if !strings.Contains(meta[MetaArchitecture], `"act":"`+string(act)+`"`) {
			t.Fatalf("%s: architecture %s", act, meta[MetaArchitecture])
		}
		// The second Linear sits after the activation module, as in
		// nn.Sequential(Linear, Custom(), Linear).
		tensors, _, _ := ReadSafetensors(mustOpen(t, p))
		if _, ok := tensors["2.weight"]; !ok {
			t.Fatalf("%s: keys %v", act, keys(tensors))
		}
		if d := testutil.MaxRelDiff(got.Forward(x), m.Forward(x)); d != 0 {
			t.Fatalf("%s: round trip changes the outputs by %g", act, d)
		}
		// Forward applies φ.
		want := mat.NewDense(40, 3, nil)
		f := act.Func()
		var pre mat.Dense
		pre.Mul(x, m.Layers[0].Weight.T())
		pre.Apply(func(_, _ int, v float64) float64 { return f(v) }, &pre)
		want.Mul(&pre, m.Layers[1].Weight.T())
		if d := testutil.MaxRelDiff(m.Forward(x), want); d > 1e-13 {
			t.Fatalf("%s: Forward differs from φ(XVᵀ)Uᵀ by %g", act, d)
		}
	}
	// A ReLU model's file is byte-identical to one written with the
	// architecture the old code wrote (keys 0/2, act "relu").
	m := nn.NewTwoLayer(testutil.RandDense(rng, 4, 5), testutil.RandDense(rng, 3, 4))
	var buf bytes.Buffer
	if err := WriteModel(&buf, m, nil, ""); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`{\"in\":5,\"out\":4,\"bias\":false,\"act\":\"relu\"}`)) {
		t.Fatalf("ReLU architecture header changed: %.300s", buf.String())
	}
	// Non-canonical or unknown names in a header: canonicalised or refused.
	for name, ok := range map[string]bool{"relupow2.0": true, "ReLUPow3": true, "relupow-1": false, "swish": false} {
		file := replaceInHeader(buf.Bytes(), `\"act\":\"relu\"`, `\"act\":\"`+name+`\"`)
		got, _, err := ReadModel(bytes.NewReader(file))
		if ok != (err == nil) {
			t.Fatalf("%s: err %v", name, err)
		}
		if ok && !got.Layers[0].Act.Valid() {
			t.Fatalf("%s loaded as non-canonical %q", name, got.Layers[0].Act)
		}
	}
}

// replaceInHeader edits the JSON header of a safetensors file and fixes its
// 8-byte length prefix.
func replaceInHeader(file []byte, old, new string) []byte {
	n := binary.LittleEndian.Uint64(file[:8])
	hdr := strings.Replace(string(file[8:8+n]), old, new, 1)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	out = append(out, hdr...)
	return append(out, file[8+n:]...)
}
