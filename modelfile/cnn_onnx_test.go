package modelfile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/internal/testutil/nets"
	"github.com/relurec/relurec/nn"
)

// sameCNN reports how got differs from want, parameters bit for bit ("" if
// not at all); zero strides compare as their defaults.
func sameCNN(got, want *nn.CNN) string {
	if got.Input != want.Input {
		return fmt.Sprintf("input %v, want %v", got.Input, want.Input)
	}
	if len(got.Layers) != len(want.Layers) {
		return fmt.Sprintf("%d layers, want %d", len(got.Layers), len(want.Layers))
	}
	for i, l := range got.Layers {
		w := want.Layers[i]
		if fmt.Sprintf("%T", l) != fmt.Sprintf("%T", w) {
			return fmt.Sprintf("layer %d is %T, want %T", i, l, w)
		}
		switch l := l.(type) {
		case *nn.Conv2d:
			wc := w.(*nn.Conv2d)
			if l.Kernel != wc.Kernel || l.Strides() != wc.Strides() || l.Padding != wc.Padding {
				return fmt.Sprintf("layer %d: kernel %v stride %v padding %v, want %v %v %v", i, l.Kernel, l.Strides(), l.Padding, wc.Kernel, wc.Strides(), wc.Padding)
			}
		case *nn.MaxPool2d:
			wp := w.(*nn.MaxPool2d)
			if l.Kernel != wp.Kernel || l.Strides() != wp.Strides() || l.Padding != wp.Padding {
				return fmt.Sprintf("layer %d: pool %v %v %v, want %v %v %v", i, l.Kernel, l.Strides(), l.Padding, wp.Kernel, wp.Strides(), wp.Padding)
			}
		}
		gw, gb := nn.LayerParams(l)
		ww, wb := nn.LayerParams(w)
		if gw == nil {
			continue
		}
		if d := sameMLP(&nn.MLP{Layers: []nn.Layer{{Weight: gw, Bias: gb, Act: nn.Identity}}}, &nn.MLP{Layers: []nn.Layer{{Weight: ww, Bias: wb, Act: nn.Identity}}}); d != "" {
			return fmt.Sprintf("layer %d: %s", i, d)
		}
	}
	return ""
}

// roundCNN returns net with every parameter rounded to float32.
func roundCNN(net *nn.CNN) *nn.CNN {
	out := &nn.CNN{Input: net.Input}
	for _, l := range net.Layers {
		switch l := l.(type) {
		case *nn.Conv2d:
			r := roundF32(&nn.MLP{Layers: []nn.Layer{{Weight: l.Weight, Bias: l.Bias}}}).Layers[0]
			c := *l
			c.Weight, c.Bias = r.Weight, r.Bias
			out.Layers = append(out.Layers, &c)
		case *nn.Linear:
			r := roundF32(&nn.MLP{Layers: []nn.Layer{{Weight: l.Weight, Bias: l.Bias}}}).Layers[0]
			out.Layers = append(out.Layers, &nn.Linear{Weight: r.Weight, Bias: r.Bias})
		default:
			out.Layers = append(out.Layers, l)
		}
	}
	return out
}

// A small CNN shaped like a Fashion-MNIST classifier (two convs, two pools,
// two Linear).
func fashionLikeCNN(rng *rand.Rand) *nn.CNN {
	return &nn.CNN{Input: nn.FeatureShape{C: 1, H: 12, W: 12}, Layers: []nn.CNNLayer{
		&nn.Conv2d{Weight: testutil.RandDense(rng, 4, 9), Bias: testutil.RandVec(rng, 4), Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}},
		&nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{2, 2}},
		&nn.Conv2d{Weight: testutil.RandDense(rng, 6, 36), Bias: testutil.RandVec(rng, 6), Kernel: [2]int{3, 3}, Padding: [2]int{1, 1}},
		&nn.ReLULayer{}, &nn.MaxPool2d{Kernel: [2]int{2, 2}},
		&nn.Flatten{}, &nn.Linear{Weight: testutil.RandDense(rng, 8, 54), Bias: testutil.RandVec(rng, 8)}, &nn.ReLULayer{},
		&nn.Linear{Weight: testutil.RandDense(rng, 3, 8), Bias: testutil.RandVec(rng, 3)},
	}}
}

// WriteCNNONNX then ReadCNNONNX (and WriteCNNModel then ReadCNNModel) give
// back the same network: every bit in F64, float32-rounded in F32. The
// generic readers return a *CNN; the MLP readers refuse it with ErrNotMLP.
func TestCNNFileRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for name, net := range map[string]*nn.CNN{"all modules": nets.RandCNN(rng), "fashion-like": fashionLikeCNN(rng)} {
		for _, dtype := range []string{"F64", "F32"} {
			want := net
			if dtype == "F32" {
				want = roundCNN(net)
			}
			var onnxBuf, stBuf bytes.Buffer
			if err := WriteCNNONNX(&onnxBuf, net, map[string]string{"k": "v"}, dtype); err != nil {
				t.Fatalf("%s %s: %v", name, dtype, err)
			}
			if err := WriteCNNModel(&stBuf, net, map[string]string{"k": "v"}, dtype); err != nil {
				t.Fatalf("%s %s: %v", name, dtype, err)
			}
			got, err := ReadCNNONNX(bytes.NewReader(onnxBuf.Bytes()))
			if err != nil {
				t.Fatalf("%s %s: reading ONNX back: %v", name, dtype, err)
			}
			if d := sameCNN(got, want); d != "" {
				t.Errorf("%s %s ONNX: %s", name, dtype, d)
			}
			gotST, meta, err := ReadCNNModel(bytes.NewReader(stBuf.Bytes()))
			if err != nil {
				t.Fatalf("%s %s: reading safetensors back: %v", name, dtype, err)
			}
			if d := sameCNN(gotST, want); d != "" || meta["k"] != "v" || meta["format"] != "pt" {
				t.Errorf("%s %s safetensors: %s (metadata %v)", name, dtype, d, meta)
			}
			if n, err := ReadONNXNetwork(bytes.NewReader(onnxBuf.Bytes())); err != nil || fmt.Sprintf("%T", n) != "*nn.CNN" {
				t.Errorf("%s %s: ReadONNXNetwork gave %T, %v", name, dtype, n, err)
			}
			if n, _, err := ReadNetwork(bytes.NewReader(stBuf.Bytes())); err != nil || fmt.Sprintf("%T", n) != "*nn.CNN" {
				t.Errorf("%s %s: ReadNetwork gave %T, %v", name, dtype, n, err)
			}
			if _, err := ReadONNX(bytes.NewReader(onnxBuf.Bytes())); !errors.Is(err, ErrNotMLP) || !errors.Is(err, ErrONNX) || !errors.Is(err, ErrModelFile) {
				t.Errorf("%s %s: ReadONNX of a CNN: %v, want ErrNotMLP, ErrONNX and ErrModelFile", name, dtype, err)
			}
			if _, _, err := ReadModel(bytes.NewReader(stBuf.Bytes())); !errors.Is(err, ErrNotMLP) || !errors.Is(err, ErrModelFile) {
				t.Errorf("%s %s: ReadModel of a CNN: %v, want ErrNotMLP", name, dtype, err)
			}
		}
	}
	// The generic readers still read MLPs as MLPs.
	m := onnxWriteCases()[3].m
	var buf bytes.Buffer
	if err := WriteONNX(&buf, m, nil, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := ReadONNXNetwork(&buf); err != nil || sameMLP(n.(*nn.MLP), m) != "" {
		t.Fatalf("ReadONNXNetwork of an MLP: %v", err)
	}
	buf.Reset()
	if err := WriteModel(&buf, m, nil, ""); err != nil {
		t.Fatal(err)
	}
	if n, _, err := ReadNetwork(&buf); err != nil || sameMLP(n.(*nn.MLP), m) != "" {
		t.Fatalf("ReadNetwork of an MLP: %v", err)
	}
	// Save/Load through files.
	dir := t.TempDir()
	net := fashionLikeCNN(rng)
	if err := SaveCNNONNX(filepath.Join(dir, "c.onnx"), net, nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := SaveCNNModel(filepath.Join(dir, "c.safetensors"), net, nil, ""); err != nil {
		t.Fatal(err)
	}
	a, err1 := LoadCNNONNX(filepath.Join(dir, "c.onnx"))
	b, _, err2 := LoadCNNModel(filepath.Join(dir, "c.safetensors"))
	if err1 != nil || err2 != nil || sameCNN(a, net) != "" || sameCNN(b, net) != "" {
		t.Fatalf("Load: %v, %v", err1, err2)
	}
}

// cnnGraphBytes is a hand-made ONNX graph: the example CNN's nodes with one
// changed by edit, for the reader's error tests.
func cnnGraphBytes(t *testing.T, edit func(nodes *[]*pbEnc, inits map[string]*pbEnc)) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(13, 14))
	tensor := func(name string, dims ...int) *pbEnc {
		n := 1
		for _, d := range dims {
			n *= d
		}
		tp, err := onnxTensorProto(name, dims, testutil.RandVec(rng, n), onnxDouble)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	inits := map[string]*pbEnc{
		"0.weight": tensor("0.weight", 4, 1, 3, 3), "0.bias": tensor("0.bias", 4),
		"4.weight": tensor("4.weight", 3, 4*3*3),
	}
	conv := []*pbEnc{onnxIntsAttr("kernel_shape", 3, 3), onnxIntsAttr("pads", 1, 1, 1, 1), onnxIntsAttr("strides", 1, 1), onnxIntAttr("group", 1)}
	nodes := []*pbEnc{
		onnxNodeProto("conv0", "Conv", []string{"input", "0.weight", "0.bias"}, "a", conv...),
		onnxNodeProto("relu1", "Relu", []string{"a"}, "b"),
		onnxNodeProto("pool2", "MaxPool", []string{"b"}, "c", onnxIntsAttr("kernel_shape", 2, 2), onnxIntsAttr("strides", 2, 2)),
		onnxNodeProto("flat3", "Flatten", []string{"c"}, "d", onnxIntAttr("axis", 1)),
		onnxNodeProto("gemm4", "Gemm", []string{"d", "4.weight"}, "output", onnxIntAttr("transB", 1)),
	}
	edit(&nodes, inits)
	g := &pbEnc{}
	for _, n := range nodes {
		g.msg(graphNode, n)
	}
	names := make([]string, 0, len(inits))
	for name := range inits {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		g.msg(graphInitializer, inits[name])
	}
	g.msg(graphInput, onnxValueInfo("input", onnxDouble, []int{1, 6, 6}))
	g.msg(graphOutput, onnxValueInfo("output", onnxDouble, []int{3}))
	var buf bytes.Buffer
	if err := writeONNXModel(&buf, onnxModelProto(g, "test", nil, MetaCNN, "")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The hand-made graph reads; each broken variant is refused with an error
// naming the node at fault.
func TestCNNONNXBad(t *testing.T) {
	net, err := ReadCNNONNX(bytes.NewReader(cnnGraphBytes(t, func(*[]*pbEnc, map[string]*pbEnc) {})))
	if err != nil {
		t.Fatalf("the unedited graph: %v", err)
	}
	if net.Out() != 3 || len(net.Layers) != 5 {
		t.Fatalf("the unedited graph gave %v", net)
	}
	// A Linear exported as MatMul (in × out weight) then Add reads too,
	// and so does a Conv without bias.
	mm, err := ReadCNNONNX(bytes.NewReader(cnnGraphBytes(t, func(np *[]*pbEnc, in map[string]*pbEnc) {
		w := net.Layers[4].(*nn.Linear).Weight
		in["4.weight"], _ = onnxTensorProto("4.weight", []int{36, 3}, rowMajor(mat.DenseCopyOf(w.T())), onnxDouble)
		in["4.bias"], _ = onnxTensorProto("4.bias", []int{3}, []float64{1, 2, 3}, onnxDouble)
		n := *np
		n[0] = onnxNodeProto("conv0", "Conv", []string{"input", "0.weight"}, "a", onnxIntsAttr("pads", 1, 1, 1, 1))
		n[4] = onnxNodeProto("mm4", "MatMul", []string{"d", "4.weight"}, "e")
		*np = append(n, onnxNodeProto("add4", "Add", []string{"e", "4.bias"}, "output"))
	})))
	if err != nil {
		t.Fatalf("MatMul + Add: %v", err)
	}
	if l := mm.Layers[4].(*nn.Linear); mm.Layers[0].(*nn.Conv2d).Bias != nil || testutil.DiffNormInf(l.Weight, net.Layers[4].(*nn.Linear).Weight) != 0 || len(l.Bias) != 3 || l.Bias[2] != 3 {
		t.Fatalf("MatMul + Add gave %v", mm)
	}
	convAttrs := func(extra ...*pbEnc) []*pbEnc {
		return append([]*pbEnc{onnxIntsAttr("pads", 1, 1, 1, 1)}, extra...)
	}
	for name, tc := range map[string]struct {
		edit func(nodes *[]*pbEnc, inits map[string]*pbEnc)
		want string
	}{
		"unsupported op": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[1] = onnxNodeProto("sig1", "Sigmoid", []string{"a"}, "b")
		}, `unsupported operator Sigmoid (node "sig1")`},
		"kernel_shape mismatch": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[0] = onnxNodeProto("conv0", "Conv", []string{"input", "0.weight", "0.bias"}, "a", convAttrs(onnxIntsAttr("kernel_shape", 5, 5))...)
		}, `Conv "conv0": kernel_shape [5 5] does not match`},
		"3-D weight": {func(_ *[]*pbEnc, in map[string]*pbEnc) {
			tp, _ := onnxTensorProto("0.weight", []int{4, 1, 9}, make([]float64, 36), onnxDouble)
			in["0.weight"] = tp
		}, `Conv "conv0": weight "0.weight" has shape [4 1 9]`},
		"groups": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[0] = onnxNodeProto("conv0", "Conv", []string{"input", "0.weight", "0.bias"}, "a", convAttrs(onnxIntAttr("group", 2))...)
		}, `Conv "conv0" has group [2]`},
		"dilation": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[0] = onnxNodeProto("conv0", "Conv", []string{"input", "0.weight", "0.bias"}, "a", convAttrs(onnxIntsAttr("dilations", 2, 2))...)
		}, `Conv "conv0" has dilations [2 2]`},
		"asymmetric pads": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[0] = onnxNodeProto("conv0", "Conv", []string{"input", "0.weight", "0.bias"}, "a", onnxIntsAttr("pads", 1, 1, 0, 0))
		}, `Conv "conv0": pads [1 1 0 0]`},
		"ceil mode": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[2] = onnxNodeProto("pool2", "MaxPool", []string{"b"}, "c", onnxIntsAttr("kernel_shape", 2, 2), onnxIntAttr("ceil_mode", 1))
		}, `MaxPool "pool2" has ceil_mode [1]`},
		"wrong in channels": {func(_ *[]*pbEnc, in map[string]*pbEnc) {
			tp, _ := onnxTensorProto("0.weight", []int{4, 2, 3, 3}, make([]float64, 72), onnxDouble)
			in["0.weight"] = tp
		}, `node "conv0": nn: CNN layer 0 (Conv2d): takes 2 input channels`},
		"gemm width": {func(_ *[]*pbEnc, in map[string]*pbEnc) {
			tp, _ := onnxTensorProto("4.weight", []int{3, 35}, make([]float64, 105), onnxDouble)
			in["4.weight"] = tp
		}, `node "gemm4": nn: CNN layer 4 (Linear): takes 35 inputs`},
		"no flatten": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[3] = onnxNodeProto("id3", "Identity", []string{"c"}, "d")
		}, `node "gemm4": nn: CNN layer 3 (Linear): on 4×3×3 maps: add a Flatten`},
		"broken chain": {func(np *[]*pbEnc, _ map[string]*pbEnc) {
			n := *np
			n[1] = onnxNodeProto("relu1", "Relu", []string{"input"}, "b")
		}, `node "relu1" (Relu) does not take the running value "a"`},
	} {
		_, err := ReadCNNONNX(bytes.NewReader(cnnGraphBytes(t, tc.edit)))
		if err == nil || !errors.Is(err, ErrONNX) || !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrONNX error containing %q", name, err, tc.want)
		}
	}
}

// A safetensors state dict of a CNN needs the architecture metadata, and
// its tensors must match it.
func TestCNNModelFileBad(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	net := fashionLikeCNN(rng)
	var buf bytes.Buffer
	if err := WriteCNNModel(&buf, net, nil, ""); err != nil {
		t.Fatal(err)
	}
	tensors, meta, err := ReadSafetensors(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	try := func(name string, tensors map[string]Tensor, meta map[string]string, want string) {
		var b bytes.Buffer
		if err := WriteSafetensors(&b, tensors, meta, "F64"); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadNetwork(&b)
		if err == nil || !errors.Is(err, ErrModelFile) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an ErrModelFile error containing %q", name, err, want)
		}
	}
	try("no metadata", tensors, nil, "no relurec.cnn metadata")
	extra := map[string]Tensor{"99.weight": {Shape: []int{1}, F64: []float64{1}}}
	for k, v := range tensors {
		extra[k] = v
	}
	try("extra tensor", extra, meta, "tensors [99.weight] belong to no module")
	short := map[string]Tensor{}
	for k, v := range tensors {
		if k != "3.bias" {
			short[k] = v
		}
	}
	try("missing bias", short, meta, "module 3 (conv2d) declares bias true")
	bad := map[string]string{MetaCNN: strings.Replace(meta[MetaCNN], `"kernel":[3,3]`, `"kernel":[5,5]`, 1)}
	try("kernel mismatch", tensors, bad, "0.weight has dtype F64 and shape [4 1 3 3]; module 0 (conv2d) needs a floating-point tensor of shape [4 1 5 5]")
}

// The ONNX files WriteCNNONNX writes pass onnx.checker (full_check) and
// compute Forward's outputs (numpy interpreter of Conv/MaxPool/Flatten/
// Gemm/Relu, or onnx.reference where present); the safetensors files load
// into the matching torch nn.Sequential with load_state_dict(strict=True)
// and give the same outputs. Skipped without python3 + onnx (+ torch for
// the second part).
func TestCNNPythonCheck(t *testing.T) {
	py, tried := onnxPython()
	if py == "" {
		t.Skipf("no python3 with the onnx module (tried %s); install python3-onnx or set RELUREC_PYTHON", tried)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(17, 18))
	nets := map[string]*nn.CNN{"all": nets.RandCNN(rng), "fashion": fashionLikeCNN(rng)}
	args := []string{"-c", onnxCheckScript}
	var order []string
	xs := map[string]*mat.Dense{}
	for name, net := range nets {
		x := testutil.RandDense(rng, 9, net.In())
		xs[name] = x
		// The check script takes one X for all models: run it per network.
		xPath := filepath.Join(dir, name+".x.npy")
		if err := dataio.WriteNPY(xPath, x); err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, dtype := range []string{"F64", "F32"} {
			p := filepath.Join(dir, name+"_"+dtype+".onnx")
			if err := SaveCNNONNX(p, net, nil, dtype); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
		out, err := exec.Command(py, append(append(args, xPath), files...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		for i, p := range files {
			y, err := dataio.ReadMatrix(p+".y.npy", "")
			if err != nil {
				t.Fatal(err)
			}
			ref, tol := net, 1e-12
			if i == 1 {
				ref, tol = roundCNN(net), 1e-5
			}
			if d := testutil.MaxRelDiff(y, ref.Forward(x)); !(d <= tol) {
				t.Errorf("%s: onnx output differs from Forward by %.3g (relative), tolerance %g", filepath.Base(p), d, tol)
			}
		}
		order = append(order, name)
	}
	if exec.Command(py, "-c", "import torch").Run() != nil {
		t.Skip("no torch: the safetensors half is skipped")
	}
	examples, _ := filepath.Abs(filepath.Join("..", "examples"))
	for _, name := range order {
		net := nets[name]
		st := filepath.Join(dir, name+".safetensors")
		if err := SaveCNNModel(st, net, nil, "F64"); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(py, "-c", torchCNNScript, examples, st, filepath.Join(dir, name+".x.npy")).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: torch: %v\n%s", name, err, out)
		}
		y, err := dataio.ReadMatrix(st+".y.npy", "")
		if err != nil {
			t.Fatal(err)
		}
		if d := testutil.MaxRelDiff(y, net.Forward(xs[name])); !(d <= 1e-12) {
			t.Errorf("%s: torch output of the loaded safetensors differs from Forward by %.3g", name, d)
		}
	}

}

// torchCNNScript builds the nn.Sequential the MetaCNN metadata describes,
// loads the safetensors file into it with load_state_dict(strict=True) and
// writes its float64 outputs on X (rows: flattened images).
const torchCNNScript = `
import json, sys
import numpy as np
import torch
from torch import nn
sys.path.insert(0, sys.argv[1])
from torch_roundtrip import read_safetensors
tensors, meta = read_safetensors(sys.argv[2])
arch = json.loads(meta["relurec.cnn"])
mods = []
for l in arch["layers"]:
    t = l["type"]
    if t == "conv2d":
        mods.append(nn.Conv2d(l["in"], l["out"], tuple(l["kernel"]), stride=tuple(l["stride"]), padding=tuple(l["padding"]), bias=l["bias"]))
    elif t == "linear":
        mods.append(nn.Linear(l["in"], l["out"], bias=l["bias"]))
    elif t == "relu":
        mods.append(nn.ReLU())
    elif t == "maxpool2d":
        mods.append(nn.MaxPool2d(tuple(l["kernel"]), stride=tuple(l["stride"]), padding=tuple(l["padding"])))
    elif t == "flatten":
        mods.append(nn.Flatten())
model = nn.Sequential(*mods).double()
model.load_state_dict({k: v.double() for k, v in tensors.items()}, strict=True)
x = torch.from_numpy(np.load(sys.argv[3])).reshape([-1] + arch["input"])
with torch.no_grad():
    y = model(x).reshape(len(x), -1).numpy()
np.save(sys.argv[2] + ".y.npy", y)
`
