package modelfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

// testdata/torch_mlp.onnx was written by torch.onnx.export (PyTorch 1.13,
// Debian's python3-torch) for nn.Sequential(Flatten, Linear(6,5), ReLU,
// Linear(5,4), ReLU, Linear(4,3,bias=False)); torch_mlp_x.npy and
// torch_mlp_y.npy are an input batch and PyTorch's outputs for it.
func TestONNXFromPyTorch(t *testing.T) {
	m, err := LoadONNX("testdata/torch_mlp.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 3 || m.Layers[0].Act != nn.ReLU || m.Layers[1].Act != nn.ReLU || m.Layers[2].Act != nn.Identity || m.Layers[2].Bias != nil {
		t.Fatalf("architecture %+v", m.Layers)
	}
	x, err := dataio.ReadMatrix("testdata/torch_mlp_x.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	y, err := dataio.ReadMatrix("testdata/torch_mlp_y.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	var d mat.Dense
	d.Sub(m.Forward(x), y)
	if e := mat.Norm(&d, math.Inf(1)); e > 1e-5 {
		t.Fatalf("outputs differ from PyTorch's by %g", e)
	}
}

// pb is a tiny protobuf encoder for hand-built test models.
type pb struct{ b []byte }

func (p *pb) key(f, w int) { p.b = binary.AppendUvarint(p.b, uint64(f<<3|w)) }
func (p *pb) varint(f int, v uint64) *pb {
	p.key(f, wireVarint)
	p.b = binary.AppendUvarint(p.b, v)
	return p
}
func (p *pb) bytes(f int, v []byte) *pb {
	p.key(f, wireBytes)
	p.b = binary.AppendUvarint(p.b, uint64(len(v)))
	p.b = append(p.b, v...)
	return p
}
func (p *pb) str(f int, s string) *pb { return p.bytes(f, []byte(s)) }
func (p *pb) f32(f int, v float32) *pb {
	p.key(f, wireFixed32)
	p.b = binary.LittleEndian.AppendUint32(p.b, math.Float32bits(v))
	return p
}

func tensorMsg(name string, dims []int, vals []float64, double bool) []byte {
	t := &pb{}
	for _, d := range dims {
		t.varint(tensorDims, uint64(d))
	}
	var raw []byte
	if double {
		t.varint(tensorDataType, onnxDouble)
		for _, v := range vals {
			raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(v))
		}
	} else {
		t.varint(tensorDataType, onnxFloat)
		for _, v := range vals {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(v)))
		}
	}
	t.str(tensorName, name).bytes(tensorRawData, raw)
	return t.b
}

func nodeMsg(op string, in []string, out string, attrs ...[]byte) []byte {
	n := &pb{}
	for _, i := range in {
		n.str(nodeInput, i)
	}
	n.str(nodeOutput, out).str(nodeName, op+"_"+out).str(nodeOpType, op)
	for _, a := range attrs {
		n.bytes(nodeAttribute, a)
	}
	return n.b
}

func valueInfo(name string) []byte { return (&pb{}).str(valueInfoName, name).b }

// MatMul + Add (the other export style), float64 weights, a Constant node.
func TestONNXMatMulAdd(t *testing.T) {
	w := []float64{1, 2, 3, 4, 5, 6} // in×out = 2×3
	g := &pb{}
	g.bytes(graphNode, nodeMsg("MatMul", []string{"x", "w"}, "h"))
	g.bytes(graphNode, nodeMsg("Constant", nil, "b", (&pb{}).str(attrName, "value").bytes(attrT, tensorMsg("", []int{3}, []float64{1, 0, -1}, false)).b))
	g.bytes(graphNode, nodeMsg("Add", []string{"b", "h"}, "z"))
	g.bytes(graphNode, nodeMsg("Relu", []string{"z"}, "y"))
	g.bytes(graphInitializer, tensorMsg("w", []int{2, 3}, w, true))
	g.bytes(graphInput, valueInfo("x")).bytes(graphOutput, valueInfo("y"))
	model := (&pb{}).varint(1, 7).bytes(modelGraph, g.b).b
	m, err := ReadONNX(bytes.NewReader(model))
	if err != nil {
		t.Fatal(err)
	}
	out := m.Forward(mat.NewDense(1, 2, []float64{1, -1}))
	want := []float64{0, 0, 0} // [1,-1]·w + b = (-3+1, -3, -3-1), all cut by the ReLU
	for j, v := range want {
		if out.At(0, j) != v {
			t.Fatalf("output %v, want %v", out.RawRowView(0), want)
		}
	}
	out = m.Forward(mat.NewDense(1, 2, []float64{1, 1}))
	if out.At(0, 0) != 6 || out.At(0, 1) != 7 || out.At(0, 2) != 8 {
		t.Fatalf("output %v, want [6 7 8]", out.RawRowView(0))
	}
}

func TestONNXBad(t *testing.T) {
	good, err := os.ReadFile("testdata/torch_mlp.onnx")
	if err != nil {
		t.Fatal(err)
	}
	conv := &pb{}
	conv.bytes(graphNode, nodeMsg("Conv", []string{"x", "w"}, "y"))
	conv.bytes(graphInitializer, tensorMsg("w", []int{1, 1}, []float64{1}, false))
	conv.bytes(graphInput, valueInfo("x")).bytes(graphOutput, valueInfo("y"))
	cases := map[string][]byte{
		"empty":       {},
		"garbage":     []byte("not a model at all, certainly"),
		"truncated":   good[:len(good)/2],
		"no graph":    (&pb{}).varint(1, 7).b,
		"unsupported": (&pb{}).bytes(modelGraph, conv.b).b,
	}
	for name, b := range cases {
		_, err := ReadONNX(bytes.NewReader(b))
		if !errors.Is(err, ErrONNX) || !errors.Is(err, ErrModelFile) {
			t.Errorf("%s: got %v, want ErrONNX and ErrModelFile", name, err)
		}
	}
}

func FuzzReadONNX(f *testing.F) {
	good, err := os.ReadFile("testdata/torch_mlp.onnx")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:100])
	f.Add([]byte{0x3a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadONNX(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrModelFile) {
				t.Fatalf("error does not wrap ErrModelFile: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid network: %v", err)
		}
	})
}
