package modelfile

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// CNN model files: safetensors with the state dict of the equivalent
// nn.Sequential ("0.weight" of shape [16, 1, 3, 3], "0.bias", "3.weight",
// …), so torch's load_state_dict(strict=True) takes them, and the
// architecture — which a state dict does not hold: input size, strides,
// paddings, pooling — under MetaCNN in __metadata__.

// MetaCNN is the __metadata__ (and ONNX metadata_props) key under which a
// CNN's architecture is stored as JSON:
//
//	{"input": [1, 28, 28], "layers": [
//	  {"type": "conv2d", "in": 1, "out": 16, "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1], "bias": true},
//	  {"type": "relu"}, {"type": "maxpool2d", "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0]},
//	  {"type": "flatten"}, {"type": "linear", "in": 1568, "out": 10, "bias": true}]}
//
// one entry per nn.Sequential module; "input" is [C, H, W], or [D] for a
// flat input. A PyTorch user writes it next to the state dict
// (bench/cnn_fashion.py shows how) so that relurec can read the file.
const MetaCNN = "relurec.cnn"

// ErrNotMLP marks a model that holds a convolutional network where an MLP
// was expected (ReadONNX, ReadModel). It wraps ErrModelFile; ReadNetwork
// and ReadONNXNetwork read either kind.
var ErrNotMLP = errs.New("the model is a convolutional network (Conv2d/MaxPool2d layers), not an MLP; this reader takes MLPs only", ErrModelFile)

// cnnArch is the JSON under MetaCNN.
type cnnArch struct {
	Input  []int          `json:"input"`
	Layers []cnnArchLayer `json:"layers"`
}

// cnnArchLayer is one module of cnnArch.
type cnnArchLayer struct {
	Type    string `json:"type"`
	In      int    `json:"in,omitempty"`
	Out     int    `json:"out,omitempty"`
	Kernel  []int  `json:"kernel,omitempty"`
	Stride  []int  `json:"stride,omitempty"`
	Padding []int  `json:"padding,omitempty"`
	Bias    *bool  `json:"bias,omitempty"`
}

// cnnArchJSON describes net (valid) for MetaCNN.
func cnnArchJSON(net *nn.CNN) (string, error) {
	a := cnnArch{Input: []int{net.Input.C, net.Input.H, net.Input.W}}
	if net.Input.Flat {
		a.Input = a.Input[:1]
	}
	for _, l := range net.Layers {
		var e cnnArchLayer
		switch l := l.(type) {
		case *nn.Conv2d:
			s, b := l.Strides(), l.Bias != nil
			e = cnnArchLayer{Type: "conv2d", In: l.InChannels(), Out: l.OutChannels(), Kernel: l.Kernel[:],
				Stride: s[:], Padding: l.Padding[:], Bias: &b}
		case *nn.ReLULayer:
			e.Type = "relu"
		case *nn.MaxPool2d:
			s := l.Strides()
			e = cnnArchLayer{Type: "maxpool2d", Kernel: l.Kernel[:], Stride: s[:], Padding: l.Padding[:]}
		case *nn.Flatten:
			e.Type = "flatten"
		case *nn.Linear:
			r, c := l.Weight.Dims()
			b := l.Bias != nil
			e = cnnArchLayer{Type: "linear", In: c, Out: r, Bias: &b}
		}
		a.Layers = append(a.Layers, e)
	}
	b, err := json.Marshal(a)
	return string(b), err
}

// SaveCNNModel writes net to path as safetensors (see WriteCNNModel),
// atomically.
func SaveCNNModel(path string, net *nn.CNN, meta map[string]string, dtype string) error {
	return saveFile(path, "model", func(w io.Writer) error { return WriteCNNModel(w, net, meta, dtype) })
}

// WriteCNNModel writes net to w as a safetensors file that PyTorch loads
// into the matching nn.Sequential with load_state_dict(strict=True): module
// i's parameters under "i.weight" (4-D out × in × kh × kw for a Conv2d,
// out × in for a Linear) and "i.bias". meta is copied into __metadata__
// with "format": "pt" and the architecture under MetaCNN (which override
// caller keys of those names). dtype "" or "F64" keeps every bit, "F32"
// halves the size.
func WriteCNNModel(w io.Writer, net *nn.CNN, meta map[string]string, dtype string) error {
	if err := net.Validate(); err != nil {
		return err
	}
	arch, err := cnnArchJSON(net)
	if err != nil {
		return err
	}
	tensors := map[string]Tensor{}
	for i, l := range net.Layers {
		wm, bias := nn.LayerParams(l)
		if wm == nil {
			continue
		}
		r, c := wm.Dims()
		shape := []int{r, c}
		if cv, ok := l.(*nn.Conv2d); ok {
			shape = []int{r, cv.InChannels(), cv.Kernel[0], cv.Kernel[1]}
		}
		tensors[fmt.Sprintf("%d.weight", i)] = Tensor{Shape: shape, F64: rowMajor(wm)}
		if bias != nil {
			tensors[fmt.Sprintf("%d.bias", i)] = Tensor{Shape: []int{r}, F64: slices.Clone(bias)}
		}
	}
	all := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		all[k] = v
	}
	all["format"] = "pt"
	all[MetaCNN] = arch
	return WriteSafetensors(w, tensors, all, dtype)
}

// LoadCNNModel reads a CNN from a safetensors file; see ReadCNNModel.
func LoadCNNModel(path string) (*nn.CNN, map[string]string, error) {
	var net *nn.CNN
	var meta map[string]string
	err := readFile(path, func(r io.Reader) (err error) { net, meta, err = ReadCNNModel(r); return err })
	return net, meta, err
}

// ReadCNNModel reads a CNN saved by SaveCNNModel, or a PyTorch state dict
// saved with the architecture under MetaCNN in its metadata: the modules
// from the metadata, their parameters from "i.weight" and "i.bias", which
// must match the declared shapes exactly (every tensor used, none missing).
// Errors wrap ErrModelFile.
func ReadCNNModel(r io.Reader) (*nn.CNN, map[string]string, error) {
	tensors, meta, err := ReadSafetensors(r)
	if err != nil {
		return nil, nil, err
	}
	net, err := cnnFromTensors(tensors, meta)
	if err != nil {
		return nil, nil, err
	}
	return net, meta, nil
}

// LoadNetwork reads a safetensors model file as a CNN when it holds one
// (MetaCNN metadata or 4-D weights), else as an MLP; see ReadNetwork.
func LoadNetwork(path string) (nn.Network, map[string]string, error) {
	var net nn.Network
	var meta map[string]string
	err := readFile(path, func(r io.Reader) (err error) { net, meta, err = ReadNetwork(r); return err })
	return net, meta, err
}

// ReadNetwork reads a safetensors model: a *CNN (ReadCNNModel) when the
// file holds MetaCNN metadata or a 4-D weight, else an *MLP (ReadModel).
func ReadNetwork(r io.Reader) (nn.Network, map[string]string, error) {
	tensors, meta, err := ReadSafetensors(r)
	if err != nil {
		return nil, nil, err
	}
	if isCNNFile(tensors, meta) {
		net, err := cnnFromTensors(tensors, meta)
		if err != nil {
			return nil, nil, err
		}
		return net, meta, nil
	}
	m, err := modelFromTensors(tensors, meta)
	if err != nil {
		return nil, nil, err
	}
	return m, meta, nil
}

// isCNNFile reports whether a safetensors file holds a CNN.
func isCNNFile(tensors map[string]Tensor, meta map[string]string) bool {
	if _, ok := meta[MetaCNN]; ok {
		return true
	}
	for _, t := range tensors {
		if len(t.Shape) == 4 {
			return true
		}
	}
	return false
}

// cnnFromTensors builds a CNN from the MetaCNN architecture and the
// state-dict tensors.
func cnnFromTensors(tensors map[string]Tensor, meta map[string]string) (*nn.CNN, error) {
	archJSON, ok := meta[MetaCNN]
	if !ok {
		return nil, modelFileErrorf("the file holds 4-D (convolution) weights but no %s metadata: a state dict does not say the input size, strides, paddings or pooling; export the model with torch.onnx.export, or add the metadata (see bench/cnn_fashion.py)", MetaCNN)
	}
	var a cnnArch
	if err := json.Unmarshal([]byte(archJSON), &a); err != nil {
		return nil, modelFileErrorf("metadata %s is not the JSON of a CNN (%v)", MetaCNN, err)
	}
	net := &nn.CNN{}
	switch len(a.Input) {
	case 3:
		net.Input = nn.FeatureShape{C: a.Input[0], H: a.Input[1], W: a.Input[2]}
	case 1:
		net.Input = nn.FeatureShape{C: a.Input[0], H: 1, W: 1, Flat: true}
	default:
		return nil, modelFileErrorf("metadata %s: input %v; expected [C, H, W] or [D]", MetaCNN, a.Input)
	}
	used := map[string]bool{}
	for i, e := range a.Layers {
		l, err := archLayerOf(i, e, tensors, used)
		if err != nil {
			return nil, err
		}
		net.Layers = append(net.Layers, l)
	}
	var extra []string
	for name := range tensors {
		if !used[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, modelFileErrorf("tensors %v belong to no module of the %s architecture", extra, MetaCNN)
	}
	if err := net.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrModelFile)
	}
	return net, nil
}

// archLayerOf builds module i from its architecture entry and its tensors,
// marking them used.
func archLayerOf(i int, e cnnArchLayer, tensors map[string]Tensor, used map[string]bool) (nn.CNNLayer, error) {
	pair := func(name string, v []int) ([2]int, error) {
		switch len(v) {
		case 0:
			return [2]int{}, nil
		case 2:
			return [2]int{v[0], v[1]}, nil
		}
		return [2]int{}, modelFileErrorf("metadata %s: module %d (%s) has %s %v; expected two integers", MetaCNN, i, e.Type, name, v)
	}
	params := func(shape []int) (*mat.Dense, []float64, error) {
		wn, bn := fmt.Sprintf("%d.weight", i), fmt.Sprintf("%d.bias", i)
		w, ok := tensors[wn]
		if !ok {
			return nil, nil, modelFileErrorf("module %d (%s) has no tensor %s", i, e.Type, wn)
		}
		if !isFloat(w.DType) || !slices.Equal(w.Shape, shape) {
			return nil, nil, modelFileErrorf("%s has dtype %s and shape %v; module %d (%s) needs a floating-point tensor of shape %v", wn, w.DType, w.Shape, i, e.Type, shape)
		}
		used[wn] = true
		b, hasB := tensors[bn]
		if e.Bias == nil || *e.Bias != hasB {
			return nil, nil, modelFileErrorf("metadata %s: module %d (%s) declares bias %v but the file has %s: %v", MetaCNN, i, e.Type, e.Bias != nil && *e.Bias, bn, hasB)
		}
		if !hasB {
			return mat.NewDense(shape[0], len(w.F64)/shape[0], w.F64), nil, nil
		}
		if !isFloat(b.DType) || !slices.Equal(b.Shape, shape[:1]) {
			return nil, nil, modelFileErrorf("%s has dtype %s and shape %v; expected a floating-point tensor of shape %v", bn, b.DType, b.Shape, shape[:1])
		}
		used[bn] = true
		return mat.NewDense(shape[0], len(w.F64)/shape[0], w.F64), b.F64, nil
	}
	var err error
	switch e.Type {
	case "conv2d":
		c := &nn.Conv2d{}
		if c.Kernel, err = pair("kernel", e.Kernel); err == nil {
			if c.Stride, err = pair("stride", e.Stride); err == nil {
				c.Padding, err = pair("padding", e.Padding)
			}
		}
		if err != nil {
			return nil, err
		}
		if e.Out <= 0 || e.In <= 0 || c.Kernel[0] <= 0 || c.Kernel[1] <= 0 {
			return nil, modelFileErrorf("metadata %s: module %d (conv2d) has in %d, out %d, kernel %v; all must be positive", MetaCNN, i, e.In, e.Out, c.Kernel)
		}
		c.Weight, c.Bias, err = params([]int{e.Out, e.In, c.Kernel[0], c.Kernel[1]})
		return c, err
	case "linear":
		if e.Out <= 0 || e.In <= 0 {
			return nil, modelFileErrorf("metadata %s: module %d (linear) has in %d, out %d; both must be positive", MetaCNN, i, e.In, e.Out)
		}
		l := &nn.Linear{}
		l.Weight, l.Bias, err = params([]int{e.Out, e.In})
		return l, err
	case "maxpool2d":
		p := &nn.MaxPool2d{}
		if p.Kernel, err = pair("kernel", e.Kernel); err == nil {
			if p.Stride, err = pair("stride", e.Stride); err == nil {
				p.Padding, err = pair("padding", e.Padding)
			}
		}
		return p, err
	case "relu":
		return &nn.ReLULayer{}, nil
	case "flatten":
		return &nn.Flatten{}, nil
	}
	return nil, modelFileErrorf("metadata %s: module %d has type %q; expected conv2d, relu, maxpool2d, flatten or linear", MetaCNN, i, e.Type)
}
