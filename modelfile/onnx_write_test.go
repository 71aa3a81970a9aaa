package modelfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// onnxWriteCases are the architectures the ONNX writer is tested on.
func onnxWriteCases() []struct {
	name string
	m    *nn.MLP
} {
	rng := rand.New(rand.NewPCG(31, 32))
	noBias := func(m *nn.MLP) *nn.MLP {
		for i := range m.Layers {
			m.Layers[i].Bias = nil
		}
		return m
	}
	allBias := func(m *nn.MLP) *nn.MLP {
		for i := range m.Layers {
			m.Layers[i].Bias = testutil.RandVec(rng, m.Layers[i].Out())
		}
		return m
	}
	return []struct {
		name string
		m    *nn.MLP
	}{
		{"1 layer, no bias", randMLP(rng, []int{4, 3}, []nn.Activation{nn.Identity})},
		{"1 layer, bias, relu", allBias(randMLP(rng, []int{5, 2}, []nn.Activation{nn.ReLU}))},
		{"3 layers, no bias", noBias(randMLP(rng, []int{6, 5, 4, 3}, []nn.Activation{nn.ReLU, nn.ReLU, nn.Identity}))},
		{"3 layers, biases", allBias(randMLP(rng, []int{6, 5, 4, 3}, []nn.Activation{nn.ReLU, nn.ReLU, nn.Identity}))},
		// A factored layer (identity between two Linear) and a mix of biases.
		{"3 layers, factored, mixed biases", randMLP(rng, []int{7, 2, 5, 1}, []nn.Activation{nn.Identity, nn.ReLU, nn.ReLU})},
		// The rectified power and exponential (Relu then Pow; Relu, Exp,
		// Sub 1), which ReadONNX reads back too.
		{"relupow2, reluexp, relupow0.5", allBias(randMLP(rng, []int{5, 4, 3, 3, 2}, []nn.Activation{nn.RectPow(2), nn.RectExp, nn.RectPow(0.5), nn.Identity}))},
	}
}

// roundF32 returns m with every parameter rounded to float32.
func roundF32(m *nn.MLP) *nn.MLP {
	out := &nn.MLP{}
	for _, l := range m.Layers {
		w := mat.DenseCopyOf(l.Weight)
		w.Apply(func(_, _ int, v float64) float64 { return float64(float32(v)) }, w)
		var b []float64
		for _, v := range l.Bias {
			b = append(b, float64(float32(v)))
		}
		out.Layers = append(out.Layers, nn.Layer{Weight: w, Bias: b, Act: l.Act})
	}
	return out
}

// sameMLP reports how got differs from want, bit for bit ("" if not at all).
func sameMLP(got, want *nn.MLP) string {
	if len(got.Layers) != len(want.Layers) {
		return fmt.Sprintf("%d layers, want %d", len(got.Layers), len(want.Layers))
	}
	for i, l := range got.Layers {
		w := want.Layers[i]
		if l.Act != w.Act {
			return fmt.Sprintf("layer %d activation %q, want %q", i, l.Act, w.Act)
		}
		if (l.Bias == nil) != (w.Bias == nil) || len(l.Bias) != len(w.Bias) {
			return fmt.Sprintf("layer %d bias %v, want %v", i, l.Bias, w.Bias)
		}
		for j := range l.Bias {
			if math.Float64bits(l.Bias[j]) != math.Float64bits(w.Bias[j]) {
				return fmt.Sprintf("layer %d bias[%d] = %v, want %v", i, j, l.Bias[j], w.Bias[j])
			}
		}
		r, c := l.Weight.Dims()
		if wr, wc := w.Weight.Dims(); r != wr || c != wc {
			return fmt.Sprintf("layer %d weight %d×%d, want %d×%d", i, r, c, wr, wc)
		}
		for a := 0; a < r; a++ {
			for b := 0; b < c; b++ {
				if math.Float64bits(l.Weight.At(a, b)) != math.Float64bits(w.Weight.At(a, b)) {
					return fmt.Sprintf("layer %d weight[%d,%d] = %v, want %v", i, a, b, l.Weight.At(a, b), w.Weight.At(a, b))
				}
			}
		}
	}
	return ""
}

// WriteONNX then ReadONNX gives back the same network: every bit in F64,
// the float32 rounding of every parameter in F32.
func TestONNXWriteRoundTrip(t *testing.T) {
	for _, tc := range onnxWriteCases() {
		for _, dtype := range []string{"", "F64", "F32"} {
			var buf bytes.Buffer
			if err := WriteONNX(&buf, tc.m, map[string]string{"k": "v"}, dtype); err != nil {
				t.Fatalf("%s %q: %v", tc.name, dtype, err)
			}
			got, err := ReadONNX(&buf)
			if err != nil {
				t.Fatalf("%s %q: reading back: %v", tc.name, dtype, err)
			}
			want := tc.m
			if dtype == "F32" {
				want = roundF32(tc.m)
			}
			if d := sameMLP(got, want); d != "" {
				t.Errorf("%s %q: %s", tc.name, dtype, d)
			}
		}
	}
}

// SaveONNX writes a file LoadONNX reads; a failed write leaves the old file.
func TestSaveONNX(t *testing.T) {
	m := onnxWriteCases()[3].m
	p := filepath.Join(t.TempDir(), "m.onnx")
	if err := SaveONNX(p, m, nil, "F64"); err != nil {
		t.Fatal(err)
	}
	got, err := LoadONNX(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameMLP(got, m); d != "" {
		t.Fatal(d)
	}
	before, _ := os.ReadFile(p)
	bad := &nn.MLP{Layers: []nn.Layer{{Weight: mat.NewDense(1, 1, []float64{1e300}), Act: nn.ReLU}}}
	if err := SaveONNX(p, bad, nil, "F32"); err == nil {
		t.Fatal("a weight overflowing float32 was written as F32")
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("a failed SaveONNX changed the file")
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 1 {
		t.Fatalf("a failed SaveONNX left files behind: %v", entries)
	}
}

// The ModelProto's header fields and metadata_props.
func TestONNXWriteModelFields(t *testing.T) {
	m := onnxWriteCases()[2].m
	var buf bytes.Buffer
	meta := map[string]string{"relurec.route": "test", "b": "2", MetaArchitecture: "overridden"}
	if err := WriteONNX(&buf, m, meta, ""); err != nil {
		t.Fatal(err)
	}
	fields, err := pbFields(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	var keys []string
	var ir, opset uint64
	var producer string
	for _, f := range fields {
		switch f.num {
		case modelIRVersion:
			ir = f.v
		case modelProducerName:
			producer = string(f.b)
		case modelOpsetImport:
			sub, _ := pbFields(f.b)
			for _, s := range sub {
				if s.num == opsetVersion {
					opset = s.v
				}
			}
		case modelMetadataProps:
			sub, _ := pbFields(f.b)
			var k, v string
			for _, s := range sub {
				if s.num == entryKey {
					k = string(s.b)
				} else if s.num == entryValue {
					v = string(s.b)
				}
			}
			props[k] = v
			keys = append(keys, k)
		}
	}
	if ir != onnxIRVersion || opset != 13 || producer != "relurec" {
		t.Fatalf("ir_version %d, opset %d, producer %q", ir, opset, producer)
	}
	if props["relurec.route"] != "test" || props["b"] != "2" {
		t.Fatalf("metadata_props %v", props)
	}
	if !strings.HasPrefix(props[MetaArchitecture], `[{"in":6,"out":5,"bias":false,"act":"relu"}`) {
		t.Fatalf("architecture metadata %q", props[MetaArchitecture])
	}
	if strings.Join(keys, ",") != "b,"+MetaArchitecture+",relurec.route" {
		t.Fatalf("metadata keys %v, want them sorted", keys)
	}
	// The same model and metadata give the same bytes.
	var again bytes.Buffer
	if err := WriteONNX(&again, m, meta, ""); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatal("two writes of one model differ")
	}
}

// Invalid networks and dtypes are refused before anything is written; the
// rectified power and exponential are written (in Pow/Exp nodes that
// ReadONNX does not import, which it says clearly).
func TestONNXWriteErrors(t *testing.T) {
	good := onnxWriteCases()[0].m
	nan := &nn.MLP{Layers: []nn.Layer{{Weight: mat.NewDense(1, 2, []float64{1, math.NaN()}), Act: nn.ReLU}}}
	for name, tc := range map[string]struct {
		m     *nn.MLP
		dtype string
	}{
		"no layers": {&nn.MLP{}, ""},
		"nil":       {nil, ""},
		"NaN":       {nan, ""},
		"bad act":   {&nn.MLP{Layers: []nn.Layer{{Weight: mat.NewDense(1, 1, []float64{1}), Act: "tanh"}}}, ""},
		"dtype F16": {good, "F16"},
		"dtype f64": {good, "f64"},
	} {
		var buf bytes.Buffer
		err := WriteONNX(&buf, tc.m, nil, tc.dtype)
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error %v", name, buf.Len(), err)
		}
		if strings.HasPrefix(name, "dtype") && !errors.Is(err, errs.ErrInput) {
			t.Errorf("%s: %v does not wrap ErrInput", name, err)
		}
	}
	for _, act := range []nn.Activation{nn.RectPow(2), nn.RectPow(0.5), nn.RectExp} {
		m := nn.NewTwoLayerAct(mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6}), mat.NewDense(1, 2, []float64{1, -1}), act)
		var buf bytes.Buffer
		if err := WriteONNX(&buf, m, nil, ""); err != nil {
			t.Fatalf("%s: %v", act, err)
		}
		// ReadONNX reads these activations back.
		got, err := ReadONNX(&buf)
		if err != nil || got.Layers[0].Act != act {
			t.Fatalf("%s: ReadONNX gave %v (activation %v)", act, err, got)
		}
	}
}

// onnxCheckScript checks each model given on the command line with
// onnx.checker.check_model(full_check=True) (which runs strict shape
// inference) and evaluates it on X.npy, writing <model>.y.npy. It uses
// onnx.reference.ReferenceEvaluator (ONNX ≥ 1.13) when present, else a
// small numpy interpreter of the operators relurec writes (Debian 12 ships
// ONNX 1.12, which has no reference evaluator); it prints which.
const onnxCheckScript = `
import sys
import numpy as np
import onnx
from onnx import numpy_helper

def windows(x, kernel, strides, pads, fill):
    """Yield (i, j, view): the input under kernel position (i, j) at every output position."""
    p = pads or [0, 0, 0, 0]
    s = strides or [1, 1]
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=fill)
    oh = (xp.shape[2] - kernel[0]) // s[0] + 1
    ow = (xp.shape[3] - kernel[1]) // s[1] + 1
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            yield i, j, xp[:, :, i:i + s[0] * (oh - 1) + 1:s[0], j:j + s[1] * (ow - 1) + 1:s[1]]

def conv(x, w, b, a):
    assert a.get("group", 1) == 1 and list(a.get("dilations", [1, 1])) == [1, 1]
    y = 0
    for i, j, v in windows(x, w.shape[2:], a.get("strides"), a.get("pads"), 0):
        y = y + np.einsum("nchw,oc->nohw", v, w[:, :, i, j])
    return y if b is None else y + b[None, :, None, None]

def maxpool(x, a):
    assert a.get("ceil_mode", 0) == 0
    y = None
    for _, _, v in windows(x, a["kernel_shape"], a.get("strides"), a.get("pads"), -np.inf):
        y = v if y is None else np.maximum(y, v)
    return y

def interpret(model, x):
    env = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    env[model.graph.input[0].name] = x
    for n in model.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        i = [env[s] for s in n.input]
        if n.op_type == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(i) > 2:
                y = y + a.get("beta", 1.0) * i[2]
        elif n.op_type == "Conv":
            y = conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif n.op_type == "MaxPool":
            y = maxpool(i[0], a)
        elif n.op_type == "Flatten":
            y = i[0].reshape(len(i[0]), -1)
        elif n.op_type == "Relu":
            y = np.maximum(i[0], 0)
        elif n.op_type == "Pow":
            y = np.power(i[0], i[1]).astype(i[0].dtype)
        elif n.op_type == "Exp":
            y = np.exp(i[0])
        elif n.op_type == "Sub":
            y = i[0] - i[1]
        else:
            raise SystemExit("interpreter: unexpected operator " + n.op_type)
        env[n.output[0]] = y.astype(i[0].dtype)
    return env[model.graph.output[0].name]

x_path = sys.argv[1]
try:
    from onnx.reference import ReferenceEvaluator
except ImportError:
    ReferenceEvaluator = None
print("onnx", onnx.__version__, "evaluator:", "onnx.reference.ReferenceEvaluator" if ReferenceEvaluator else "numpy interpreter")
for path in sys.argv[2:]:
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    elem = model.graph.input[0].type.tensor_type.elem_type
    x = np.load(x_path).astype(np.float64 if elem == onnx.TensorProto.DOUBLE else np.float32)
    # A CNN's input is [N, C, H, W]: the rows of X are flattened images.
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = x.reshape([len(x)] + dims)
    if ReferenceEvaluator is not None:
        y = ReferenceEvaluator(model).run(None, {"input": x})[0]
    else:
        y = interpret(model, x)
    want = np.float64 if elem == onnx.TensorProto.DOUBLE else np.float32
    if y.dtype != want:
        raise SystemExit(path + ": output dtype " + str(y.dtype))
    np.save(path + ".y.npy", y.reshape(len(y), -1).astype(np.float64))
`

// onnxPython returns a Python interpreter that imports onnx: $RELUREC_PYTHON,
// else python3 on PATH, else /usr/bin/python3 (where Debian's python3-onnx
// lives when PATH starts with a pyenv or virtualenv python).
func onnxPython() (string, string) {
	var tried []string
	cands := []string{os.Getenv("RELUREC_PYTHON"), "python3", "/usr/bin/python3"}
	for _, c := range cands {
		if c == "" {
			continue
		}
		p, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c+" (not found)")
			continue
		}
		if exec.Command(p, "-c", "import onnx, onnx.checker, numpy").Run() == nil {
			return p, ""
		}
		tried = append(tried, p+" (no onnx)")
	}
	return "", strings.Join(tried, ", ")
}

// The files WriteONNX writes pass ONNX's own checker with full_check and
// compute what Forward computes: to 1e-12 (relative to the largest output)
// in F64, to float32 precision in F32. Skipped without python3 and onnx
// (Debian: apt-get install python3-onnx).
func TestONNXPythonCheck(t *testing.T) {
	py, tried := onnxPython()
	if py == "" {
		t.Skipf("no python3 with the onnx module (tried %s); install python3-onnx or set RELUREC_PYTHON", tried)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(41, 42))
	x := testutil.RandDense(rng, 37, 6)
	xPath := filepath.Join(dir, "x.npy")
	if err := dataio.WriteNPY(xPath, x); err != nil {
		t.Fatal(err)
	}
	type model struct {
		name  string
		m     *nn.MLP
		dtype string
	}
	var models []model
	for i, tc := range onnxWriteCases() {
		if tc.m.In() == 6 {
			models = append(models, model{fmt.Sprintf("case%d", i), tc.m, "F64"}, model{fmt.Sprintf("case%d_f32", i), tc.m, "F32"})
		}
	}
	for _, act := range []nn.Activation{nn.RectPow(2), nn.RectPow(3), nn.RectPow(0.5), nn.RectPow(1.7), nn.RectExp} {
		m := randMLP(rng, []int{6, 5, 4, 2}, []nn.Activation{act, nn.ReLU, nn.Identity})
		models = append(models, model{string(act), m, "F64"}, model{string(act) + "_f32", m, "F32"})
	}
	args := []string{"-c", onnxCheckScript, xPath}
	for _, md := range models {
		p := filepath.Join(dir, md.name+".onnx")
		if err := SaveONNX(p, md.m, map[string]string{"relurec.test": md.name}, md.dtype); err != nil {
			t.Fatalf("%s: %v", md.name, err)
		}
		args = append(args, p)
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, out)
	}
	t.Logf("%s: %s", py, strings.TrimSpace(string(out)))
	for _, md := range models {
		y, err := dataio.ReadMatrix(filepath.Join(dir, md.name+".onnx.y.npy"), "")
		if err != nil {
			t.Fatal(err)
		}
		ref := md.m
		tol := 1e-12
		if md.dtype == "F32" {
			ref, tol = roundF32(md.m), 1e-5
		}
		want := ref.Forward(x)
		if r, c := y.Dims(); r != 37 || c != ref.Out() {
			t.Fatalf("%s: onnx output %d×%d, want 37×%d", md.name, r, c, ref.Out())
		}
		if d := testutil.MaxRelDiff(y, want); !(d <= tol) || math.IsInf(testutil.MaxAbs(want), 0) {
			t.Errorf("%s: onnx output differs from Forward by %.3g (relative), tolerance %g", md.name, d, tol)
		} else {
			t.Logf("%s: max relative deviation from Forward %.3g", md.name, d)
		}
	}
}
