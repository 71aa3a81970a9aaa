package modelfile

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// Model files: an MLP as safetensors tensors with nn.Sequential key names,
// and back.

// MetaArchitecture is the __metadata__ key under which SaveModel stores the
// layer list as JSON: [{"in":3,"out":8,"bias":false,"act":"relu"}, ...].
// With it a file round-trips exactly, including identity activations between
// consecutive Linear layers and a ReLU after the last layer.
const MetaArchitecture = "relurec.architecture"

// archLayer is one entry of the architecture metadata.
type archLayer struct {
	In   int           `json:"in"`
	Out  int           `json:"out"`
	Bias bool          `json:"bias"`
	Act  nn.Activation `json:"act"`
}

// moduleIndices returns the nn.Sequential index of each layer's Linear
// module: every Linear and every activation module (ReLU, or the custom
// module a PyTorch user writes for relupow<c> or reluexp, which has no
// parameters) takes an index, identity takes none. So [ReLU, Identity]
// layers sit at 0 and 2 (ReLU at 1).
func moduleIndices(acts []nn.Activation) []int {
	idx := make([]int, len(acts))
	k := 0
	for i, a := range acts {
		idx[i] = k
		k++
		if a != nn.Identity { // an activation module (ReLU or a custom one)
			k++
		}
	}
	return idx
}

// SaveModel writes m to path as a safetensors file that PyTorch loads into
// the matching nn.Sequential with load_state_dict: layer weights and biases
// under "N.weight" and "N.bias", N counting Linear and ReLU modules. meta is
// copied into __metadata__ together with "format": "pt" and the architecture
// (MetaArchitecture), which override caller keys of the same name. dtype ""
// or "F64" keeps every bit, so exact recoveries survive the file; "F32"
// halves the size at float32 precision. The write is atomic.
func SaveModel(path string, m *nn.MLP, meta map[string]string, dtype string) error {
	return saveFile(path, "model", func(w io.Writer) error { return WriteModel(w, m, meta, dtype) })
}

// WriteModel writes m in safetensors format to w; see SaveModel.
func WriteModel(w io.Writer, m *nn.MLP, meta map[string]string, dtype string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	acts := make([]nn.Activation, len(m.Layers))
	arch := make([]archLayer, len(m.Layers))
	for i, l := range m.Layers {
		acts[i] = l.Act
		arch[i] = archLayer{In: l.In(), Out: l.Out(), Bias: l.Bias != nil, Act: l.Act}
	}
	idx := moduleIndices(acts)
	tensors := make(map[string]Tensor, 2*len(m.Layers))
	for i, l := range m.Layers {
		r, c := l.Weight.Dims()
		tensors[fmt.Sprintf("%d.weight", idx[i])] = Tensor{Shape: []int{r, c}, F64: rowMajor(l.Weight)}
		if l.Bias != nil {
			tensors[fmt.Sprintf("%d.bias", idx[i])] = Tensor{Shape: []int{r}, F64: append([]float64(nil), l.Bias...)}
		}
	}
	archJSON, err := json.Marshal(arch)
	if err != nil {
		return err
	}
	all := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		all[k] = v
	}
	all["format"] = "pt"
	all[MetaArchitecture] = string(archJSON)
	return WriteSafetensors(w, tensors, all, dtype)
}

// LoadModel reads a network saved by SaveModel or by PyTorch
// (safetensors.torch.save_file(model.state_dict(), path) for an
// nn.Sequential of Linear and ReLU modules) and returns it with the file's
// metadata. Without relurec's architecture metadata the layers are inferred
// from the module indices: consecutive Linear modules two apart have a ReLU
// between them, one apart none; the last layer has no activation. Keys may
// carry a common prefix ("net.0.weight"). Shapes must chain and all values
// must be finite. Errors wrap ErrModelFile.
func LoadModel(path string) (*nn.MLP, map[string]string, error) {
	var m *nn.MLP
	var meta map[string]string
	err := readFile(path, func(r io.Reader) (err error) { m, meta, err = ReadModel(r); return err })
	return m, meta, err
}

// ReadModel reads a network in safetensors format from r; see LoadModel.
func ReadModel(r io.Reader) (*nn.MLP, map[string]string, error) {
	tensors, meta, err := ReadSafetensors(r)
	if err != nil {
		return nil, nil, err
	}
	if isCNNFile(tensors, meta) {
		return nil, nil, fmt.Errorf("safetensors: 4-D weights or %s metadata: %w", MetaCNN, ErrNotMLP)
	}
	m, err := modelFromTensors(tensors, meta)
	if err != nil {
		return nil, nil, err
	}
	return m, meta, nil
}

var keyPattern = regexp.MustCompile(`^(.*?)([0-9]+)\.(weight|bias)$`)

// seqModule is one Linear module of an nn.Sequential: the names of its
// weight and (possibly empty) bias tensors.
type seqModule struct {
	weight, bias string
}

// seqModules is the Linear modules found in a file's tensor names.
type seqModules struct {
	byIndex map[int]*seqModule
	idx     []int  // the module indices, increasing
	prefix  string // common key prefix ("" or e.g. "net.")
}

// modelFileErrorf returns an error wrapping ErrModelFile.
func modelFileErrorf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrModelFile)...)
}

// modelFromTensors assembles an MLP from nn.Sequential-style tensors: the
// Linear modules from the key names, the layers from their tensors, the
// activations from the architecture metadata or else from the module
// indices, then checks that the shapes chain.
func modelFromTensors(tensors map[string]Tensor, meta map[string]string) (*nn.MLP, error) {
	if len(tensors) == 0 {
		return nil, modelFileErrorf("the file holds no tensors")
	}
	mods, err := findModules(tensors)
	if err != nil {
		return nil, err
	}
	layers, err := linearLayers(tensors, mods)
	if err != nil {
		return nil, err
	}
	if archJSON, ok := meta[MetaArchitecture]; ok {
		err = applyArchitecture(layers, archJSON, mods)
	} else {
		err = inferActivations(layers, mods)
	}
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(layers); i++ {
		if layers[i].In() != layers[i-1].Out() {
			return nil, modelFileErrorf("layer %s takes %d inputs but %s gives %d outputs", mods.byIndex[mods.idx[i]].weight, layers[i].In(), mods.byIndex[mods.idx[i-1]].weight, layers[i-1].Out())
		}
	}
	m := &nn.MLP{Layers: layers}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrModelFile)
	}
	return m, nil
}

// findModules groups the tensor names into Linear modules by their
// nn.Sequential index, checking that every key is "<prefix>N.weight" or
// "<prefix>N.bias" with one common prefix and that every bias has a weight.
func findModules(tensors map[string]Tensor) (seqModules, error) {
	mods := seqModules{byIndex: map[int]*seqModule{}}
	havePrefix := false
	names := make([]string, 0, len(tensors))
	for name := range tensors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		g := keyPattern.FindStringSubmatch(name)
		if g == nil || len(g[2]) > 9 {
			return mods, modelFileErrorf("tensor %q is not a Linear parameter of an nn.Sequential (expected keys such as 0.weight, 0.bias, 2.weight)", name)
		}
		if havePrefix && g[1] != mods.prefix {
			return mods, modelFileErrorf("tensor %q does not share the prefix %q of the other keys; expected one nn.Sequential", name, mods.prefix)
		}
		mods.prefix, havePrefix = g[1], true
		var k int
		fmt.Sscan(g[2], &k)
		if mods.byIndex[k] == nil {
			mods.byIndex[k] = &seqModule{}
		}
		if g[3] == "weight" {
			mods.byIndex[k].weight = name
		} else {
			mods.byIndex[k].bias = name
		}
	}
	mods.idx = make([]int, 0, len(mods.byIndex))
	for k, md := range mods.byIndex {
		if md.weight == "" {
			return mods, modelFileErrorf("%s has no matching weight %s%d.weight", md.bias, mods.prefix, k)
		}
		mods.idx = append(mods.idx, k)
	}
	sort.Ints(mods.idx)
	return mods, nil
}

// linearLayers builds one layer (weight and bias, activation unset) per
// module, checking dtypes and shapes.
func linearLayers(tensors map[string]Tensor, mods seqModules) ([]nn.Layer, error) {
	layers := make([]nn.Layer, len(mods.idx))
	for i, k := range mods.idx {
		md := mods.byIndex[k]
		w := tensors[md.weight]
		if !isFloat(w.DType) {
			return nil, modelFileErrorf("%s has dtype %s; expected a floating-point type", md.weight, w.DType)
		}
		if len(w.Shape) != 2 || w.Shape[0] == 0 || w.Shape[1] == 0 {
			return nil, modelFileErrorf("%s has shape %v; expected a non-empty 2-D (out × in) matrix", md.weight, w.Shape)
		}
		layers[i].Weight = mat.NewDense(w.Shape[0], w.Shape[1], w.F64)
		if md.bias != "" {
			b := tensors[md.bias]
			if !isFloat(b.DType) {
				return nil, modelFileErrorf("%s has dtype %s; expected a floating-point type", md.bias, b.DType)
			}
			if len(b.Shape) != 1 || b.Shape[0] != w.Shape[0] {
				return nil, modelFileErrorf("%s has shape %v but %s has %d outputs; expected shape [%d]", md.bias, b.Shape, md.weight, w.Shape[0], w.Shape[0])
			}
			layers[i].Bias = b.F64
		}
	}
	return layers, nil
}

// applyArchitecture sets the layers' activations from relurec's
// architecture metadata, after checking that it matches the module indices
// and the layers' shapes.
func applyArchitecture(layers []nn.Layer, archJSON string, mods seqModules) error {
	var arch []archLayer
	if err := json.Unmarshal([]byte(archJSON), &arch); err != nil {
		return modelFileErrorf("metadata %s is not a JSON list of layers (%v)", MetaArchitecture, err)
	}
	acts := make([]nn.Activation, len(arch))
	for i, a := range arch {
		act, err := nn.ParseActivation(string(a.Act))
		if err != nil {
			return modelFileErrorf("metadata %s: layer %d has unknown activation %q (expected \"relu\", \"identity\", \"relupow<c>\" or \"reluexp\")", MetaArchitecture, i, a.Act)
		}
		arch[i].Act = act
		acts[i] = act
	}
	want := moduleIndices(acts)
	if fmt.Sprint(want) != fmt.Sprint(mods.idx) {
		return modelFileErrorf("metadata %s describes Linear modules at indices %v but the file holds them at %v", MetaArchitecture, want, mods.idx)
	}
	for i, a := range arch {
		l := layers[i]
		if a.In != l.In() || a.Out != l.Out() || a.Bias != (l.Bias != nil) {
			return modelFileErrorf("metadata %s: layer %d is declared in=%d out=%d bias=%v but %s has shape [%d %d] and bias=%v",
				MetaArchitecture, i, a.In, a.Out, a.Bias, mods.byIndex[mods.idx[i]].weight, l.Out(), l.In(), l.Bias != nil)
		}
		layers[i].Act = a.Act
	}
	return nil
}

// inferActivations sets the layers' activations from the module indices of
// a plain PyTorch state dict: Linear modules one apart have none between
// them, two apart a ReLU; the last layer has none.
func inferActivations(layers []nn.Layer, mods seqModules) error {
	idx := mods.idx
	if idx[0] != 0 {
		return modelFileErrorf("the first Linear module is %s; expected %s0.weight (modules before the first Linear are not supported)", mods.byIndex[idx[0]].weight, mods.prefix)
	}
	for i := range layers {
		layers[i].Act = nn.Identity
		if i+1 < len(idx) {
			switch idx[i+1] - idx[i] {
			case 1:
				layers[i].Act = nn.Identity
			case 2:
				layers[i].Act = nn.ReLU
			default:
				return modelFileErrorf("modules %d and %d are %d apart: only a single ReLU may sit between Linear layers (add %s metadata to describe other architectures)",
					idx[i], idx[i+1], idx[i+1]-idx[i], MetaArchitecture)
			}
		}
	}
	return nil
}
