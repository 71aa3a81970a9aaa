package nn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/half"
)

// The safetensors format (https://github.com/huggingface/safetensors):
//
//	8 bytes    N, unsigned little-endian: the header length
//	N bytes    JSON object {NAME: {"dtype": "F32", "shape": [2, 3],
//	           "data_offsets": [BEGIN, END]}, ..., "__metadata__": {str: str}},
//	           padded with spaces to a multiple of 8 bytes
//	rest       the byte buffer; tensor NAME is rest[BEGIN:END], row-major,
//	           little-endian
//
// We read and write it ourselves (about 300 lines, fuzzed) instead of taking a
// dependency: the format is tiny, and owning the reader lets every malformed
// file become an ErrModelFile error with a message saying what is wrong.

// ErrModelFile marks a model file that is corrupt, truncated, or does not
// describe a network this package can build (unknown dtype, tensor names
// that are not nn.Sequential keys, shapes that do not chain).
var ErrModelFile = errs.New("invalid model file; expected a safetensors file of nn.Sequential Linear/ReLU layers as written by relurec or safetensors.torch.save_file", errs.ErrInput)

// maxHeader is the largest JSON header ReadSafetensors accepts. The
// reference implementation uses the same 100 MB bound; a legitimate header
// for an MLP is a few kilobytes.
const maxHeader = 100_000_000

// Tensor is one array of a safetensors file, decoded to float64. DType is the
// stored type ("F64", "F32", "F16", "BF16", or an integer or boolean type);
// Shape is row-major; F64 holds prod(Shape) values (1 for a scalar, Shape
// empty).
type Tensor struct {
	DType string
	Shape []int
	F64   []float64
}

// dtypeSize gives the bytes per element of the dtypes we decode.
var dtypeSize = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1,
}

// tensorInfo is one header entry.
type tensorInfo struct {
	DType       *string `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// ReadSafetensors reads a whole safetensors stream from r (to EOF) and
// returns its tensors, decoded to float64, and its __metadata__ map (nil when
// absent). Everything is validated before use: the header length (at most
// 100 MB and within the stream), the JSON, each dtype and shape, and the data
// offsets, which must tile the byte buffer exactly (contiguous, no overlap,
// no gap, no trailing bytes) with each tensor's length equal to
// dtype size × number of elements. Any violation gives an error wrapping
// ErrModelFile.
func ReadSafetensors(r io.Reader) (map[string]Tensor, map[string]string, error) {
	bad := func(format string, args ...any) (map[string]Tensor, map[string]string, error) {
		return nil, nil, fmt.Errorf("safetensors: "+format+": %w", append(args, ErrModelFile)...)
	}
	var nb [8]byte
	if _, err := io.ReadFull(r, nb[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad("file shorter than the 8-byte header length")
		}
		return nil, nil, err
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > maxHeader {
		return bad("header length %d exceeds the %d-byte limit (is this a safetensors file?)", n, maxHeader)
	}
	if n < 2 {
		return bad("header length %d is too small for a JSON object", n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad("file truncated inside the %d-byte header", n)
		}
		return nil, nil, err
	}
	if hdr[0] != '{' {
		return bad("header does not start with '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return bad("header is not a JSON object (%v)", err)
	}

	var meta map[string]string
	type entry struct {
		name       string
		dtype      string
		shape      []int
		begin, end int64
		count      int
	}
	entries := make([]entry, 0, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &meta); err != nil {
				return bad("__metadata__ must map strings to strings (%v)", err)
			}
			continue
		}
		var ti tensorInfo
		dec := json.NewDecoder(bytes.NewReader(msg))
		if err := dec.Decode(&ti); err != nil {
			return bad("tensor %q: malformed entry (%v)", name, err)
		}
		if ti.DType == nil || ti.Shape == nil || ti.DataOffsets == nil {
			return bad("tensor %q: entry needs \"dtype\", \"shape\" and \"data_offsets\"", name)
		}
		size, ok := dtypeSize[*ti.DType]
		if !ok {
			return bad("tensor %q has dtype %q; supported are F64, F32, F16, BF16 and integer/bool types (convert with tensor.double())", name, *ti.DType)
		}
		if len(ti.DataOffsets) != 2 {
			return bad("tensor %q: data_offsets must be [begin, end], got %d numbers", name, len(ti.DataOffsets))
		}
		e := entry{name: name, dtype: *ti.DType, begin: ti.DataOffsets[0], end: ti.DataOffsets[1], count: 1}
		if e.begin < 0 || e.end < e.begin {
			return bad("tensor %q: data_offsets [%d, %d] are not an increasing pair of non-negative offsets", name, e.begin, e.end)
		}
		e.shape = make([]int, len(ti.Shape))
		for i, s := range ti.Shape {
			if s < 0 || s > math.MaxInt32 {
				return bad("tensor %q: dimension %d is %d", name, i, s)
			}
			e.shape[i] = int(s)
		}
		// Element count, refusing anything that cannot fit the offsets
		// (checked by division so a hostile shape cannot overflow).
		for _, s := range e.shape {
			if s == 0 {
				e.count = 0
				break
			}
		}
		if e.count != 0 {
			maxCount := (e.end - e.begin) / int64(size)
			for _, s := range e.shape {
				if int64(e.count) > maxCount/int64(s) {
					return bad("tensor %q: shape %v of %s needs more than the %d bytes of data_offsets [%d, %d]",
						name, e.shape, e.dtype, e.end-e.begin, e.begin, e.end)
				}
				e.count *= s
			}
		}
		if int64(e.count)*int64(size) != e.end-e.begin {
			return bad("tensor %q: shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d",
				name, e.shape, e.dtype, int64(e.count)*int64(size), e.begin, e.end, e.end-e.begin)
		}
		entries = append(entries, e)
	}

	// The tensors must tile [0, total) exactly, as the reference
	// implementation requires: sorting by offset, each must start where the
	// previous ended.
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].begin != entries[j].begin {
			return entries[i].begin < entries[j].begin
		}
		if entries[i].end != entries[j].end {
			return entries[i].end < entries[j].end
		}
		return entries[i].name < entries[j].name
	})
	var total int64
	for _, e := range entries {
		if e.begin != total {
			if e.begin < total {
				return bad("tensor %q at offsets [%d, %d] overlaps the previous tensor, which ends at %d", e.name, e.begin, e.end, total)
			}
			return bad("gap in the data: tensor %q starts at %d but the previous tensor ends at %d", e.name, e.begin, total)
		}
		total = e.end
	}

	// Read exactly the buffer, growing with what actually arrives so a lying
	// header cannot make us allocate more than the stream holds.
	var buf bytes.Buffer
	got, err := io.Copy(&buf, io.LimitReader(r, total))
	if err != nil {
		return nil, nil, err
	}
	if got < total {
		return bad("file truncated: the header describes %d data bytes but only %d follow", total, got)
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return bad("unexpected bytes after the last tensor (data ends at offset %d)", total)
	}
	data := buf.Bytes()

	tensors := make(map[string]Tensor, len(entries))
	for _, e := range entries {
		tensors[e.name] = Tensor{DType: e.dtype, Shape: e.shape, F64: decodeTensor(e.dtype, data[e.begin:e.end], e.count)}
	}
	return tensors, meta, nil
}

// decodeTensor converts count little-endian elements of dtype to float64.
func decodeTensor(dtype string, b []byte, count int) []float64 {
	out := make([]float64, count)
	le := binary.LittleEndian
	for i := range out {
		switch dtype {
		case "F64":
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		case "F32":
			out[i] = float64(math.Float32frombits(le.Uint32(b[4*i:])))
		case "F16":
			out[i] = half.ToFloat64(le.Uint16(b[2*i:]))
		case "BF16":
			out[i] = float64(math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16))
		case "I64":
			out[i] = float64(int64(le.Uint64(b[8*i:])))
		case "I32":
			out[i] = float64(int32(le.Uint32(b[4*i:])))
		case "I16":
			out[i] = float64(int16(le.Uint16(b[2*i:])))
		case "I8":
			out[i] = float64(int8(b[i]))
		case "U64":
			out[i] = float64(le.Uint64(b[8*i:]))
		case "U32":
			out[i] = float64(le.Uint32(b[4*i:]))
		case "U16":
			out[i] = float64(le.Uint16(b[2*i:]))
		case "U8":
			out[i] = float64(b[i])
		case "BOOL":
			if b[i] != 0 {
				out[i] = 1
			}
		}
	}
	return out
}

// WriteSafetensors writes tensors and meta (omitted when empty) to w in the
// layout of the reference implementation: tensors in name order, data
// contiguous from offset 0, the JSON header compact and padded with spaces to
// a multiple of 8 bytes. dtype is "F64" (also for "") or "F32" and applies
// to every tensor; values too large for float32 are an error rather than a
// silent Inf.
func WriteSafetensors(w io.Writer, tensors map[string]Tensor, meta map[string]string, dtype string) error {
	if dtype == "" {
		dtype = "F64"
	}
	if dtype != "F64" && dtype != "F32" {
		return fmt.Errorf("safetensors: cannot write dtype %q; choose \"F64\" (exact) or \"F32\"", dtype)
	}
	size := dtypeSize[dtype]
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		if name == "" || name == "__metadata__" {
			return fmt.Errorf("safetensors: %q is not a valid tensor name", name)
		}
		count := 1
		for _, s := range t.Shape {
			if s < 0 {
				return fmt.Errorf("safetensors: tensor %q has negative dimension in shape %v", name, t.Shape)
			}
			count *= s
		}
		if count != len(t.F64) {
			return fmt.Errorf("safetensors: tensor %q has shape %v (%d elements) but %d values", name, t.Shape, count, len(t.F64))
		}
		if dtype == "F32" {
			for i, v := range t.F64 {
				if !math.IsInf(v, 0) && math.IsInf(float64(float32(v)), 0) {
					return fmt.Errorf("safetensors: tensor %q element %d = %g overflows float32; save as F64", name, i, v)
				}
			}
		}
		names = append(names, name)
	}
	sort.Strings(names)

	var h bytes.Buffer
	h.WriteByte('{')
	if len(meta) > 0 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			h.WriteString(jsonString(k))
			h.WriteByte(':')
			h.WriteString(jsonString(meta[k]))
		}
		h.WriteByte('}')
	}
	var offset int64
	for i, name := range names {
		if i > 0 || len(meta) > 0 {
			h.WriteByte(',')
		}
		t := tensors[name]
		shape := make([]string, len(t.Shape))
		for j, s := range t.Shape {
			shape[j] = fmt.Sprint(s)
		}
		end := offset + int64(len(t.F64)*size)
		fmt.Fprintf(&h, `%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}`,
			jsonString(name), dtype, strings.Join(shape, ","), offset, end)
		offset = end
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}

	bw := bufio.NewWriterSize(w, 1<<16)
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], uint64(h.Len()))
	bw.Write(nb[:])
	bw.Write(h.Bytes())
	var item [8]byte
	for _, name := range names {
		for _, v := range tensors[name].F64 {
			if dtype == "F64" {
				binary.LittleEndian.PutUint64(item[:], math.Float64bits(v))
			} else {
				binary.LittleEndian.PutUint32(item[:], math.Float32bits(float32(v)))
			}
			bw.Write(item[:size])
		}
	}
	return bw.Flush()
}

// jsonString encodes s as a JSON string without HTML escaping (which the
// reference implementation does not do either).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// MetaArchitecture is the __metadata__ key under which SaveModel stores the
// layer list as JSON: [{"in":3,"out":8,"bias":false,"act":"relu"}, ...].
// With it a file round-trips exactly, including identity activations between
// consecutive Linear layers and a ReLU after the last layer.
const MetaArchitecture = "relurec.architecture"

// archLayer is one entry of the architecture metadata.
type archLayer struct {
	In   int        `json:"in"`
	Out  int        `json:"out"`
	Bias bool       `json:"bias"`
	Act  Activation `json:"act"`
}

// moduleIndices returns the nn.Sequential index of each layer's Linear
// module: every Linear and every activation module (ReLU, or the custom
// module a PyTorch user writes for relupow<c> or reluexp, which has no
// parameters) takes an index, identity takes none. So [ReLU, Identity]
// layers sit at 0 and 2 (ReLU at 1).
func moduleIndices(acts []Activation) []int {
	idx := make([]int, len(acts))
	k := 0
	for i, a := range acts {
		idx[i] = k
		k++
		if a != Identity { // an activation module (ReLU or a custom one)
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
func SaveModel(path string, m *MLP, meta map[string]string, dtype string) error {
	err := dataio.AtomicWriteFile(path, func(w io.Writer) error { return WriteModel(w, m, meta, dtype) })
	if err != nil {
		return fmt.Errorf("nn: saving model to %s: %w", path, err)
	}
	return nil
}

// WriteModel writes m in safetensors format to w; see SaveModel.
func WriteModel(w io.Writer, m *MLP, meta map[string]string, dtype string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	acts := make([]Activation, len(m.Layers))
	arch := make([]archLayer, len(m.Layers))
	for i, l := range m.Layers {
		acts[i] = l.Act
		arch[i] = archLayer{In: l.In(), Out: l.Out(), Bias: l.Bias != nil, Act: l.Act}
	}
	idx := moduleIndices(acts)
	tensors := make(map[string]Tensor, 2*len(m.Layers))
	for i, l := range m.Layers {
		r, c := l.Weight.Dims()
		data := make([]float64, 0, r*c)
		for a := 0; a < r; a++ {
			data = append(data, l.Weight.RawRowView(a)...)
		}
		tensors[fmt.Sprintf("%d.weight", idx[i])] = Tensor{Shape: []int{r, c}, F64: data}
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
func LoadModel(path string) (*MLP, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("nn: %w", err)
	}
	defer f.Close()
	m, meta, err := ReadModel(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, nil, fmt.Errorf("nn: %s: %w", path, err)
	}
	return m, meta, nil
}

// ReadModel reads a network in safetensors format from r; see LoadModel.
func ReadModel(r io.Reader) (*MLP, map[string]string, error) {
	tensors, meta, err := ReadSafetensors(r)
	if err != nil {
		return nil, nil, err
	}
	m, err := modelFromTensors(tensors, meta)
	if err != nil {
		return nil, nil, err
	}
	return m, meta, nil
}

var keyPattern = regexp.MustCompile(`^(.*?)([0-9]+)\.(weight|bias)$`)

// modelFromTensors assembles an MLP from nn.Sequential-style tensors.
func modelFromTensors(tensors map[string]Tensor, meta map[string]string) (*MLP, error) {
	bad := func(format string, args ...any) (*MLP, error) {
		return nil, fmt.Errorf(format+": %w", append(args, ErrModelFile)...)
	}
	if len(tensors) == 0 {
		return bad("the file holds no tensors")
	}
	type module struct {
		weight, bias string
	}
	mods := map[int]*module{}
	prefix, havePrefix := "", false
	names := make([]string, 0, len(tensors))
	for name := range tensors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		g := keyPattern.FindStringSubmatch(name)
		if g == nil || len(g[2]) > 9 {
			return bad("tensor %q is not a Linear parameter of an nn.Sequential (expected keys such as 0.weight, 0.bias, 2.weight)", name)
		}
		if havePrefix && g[1] != prefix {
			return bad("tensor %q does not share the prefix %q of the other keys; expected one nn.Sequential", name, prefix)
		}
		prefix, havePrefix = g[1], true
		var k int
		fmt.Sscan(g[2], &k)
		if mods[k] == nil {
			mods[k] = &module{}
		}
		if g[3] == "weight" {
			mods[k].weight = name
		} else {
			mods[k].bias = name
		}
	}
	idx := make([]int, 0, len(mods))
	for k, md := range mods {
		if md.weight == "" {
			return bad("%s has no matching weight %s%d.weight", md.bias, prefix, k)
		}
		idx = append(idx, k)
	}
	sort.Ints(idx)

	layers := make([]Layer, len(idx))
	for i, k := range idx {
		md := mods[k]
		w := tensors[md.weight]
		if !isFloat(w.DType) {
			return bad("%s has dtype %s; expected a floating-point type", md.weight, w.DType)
		}
		if len(w.Shape) != 2 || w.Shape[0] == 0 || w.Shape[1] == 0 {
			return bad("%s has shape %v; expected a non-empty 2-D (out × in) matrix", md.weight, w.Shape)
		}
		layers[i].Weight = mat.NewDense(w.Shape[0], w.Shape[1], w.F64)
		if md.bias != "" {
			b := tensors[md.bias]
			if !isFloat(b.DType) {
				return bad("%s has dtype %s; expected a floating-point type", md.bias, b.DType)
			}
			if len(b.Shape) != 1 || b.Shape[0] != w.Shape[0] {
				return bad("%s has shape %v but %s has %d outputs; expected shape [%d]", md.bias, b.Shape, md.weight, w.Shape[0], w.Shape[0])
			}
			layers[i].Bias = b.F64
		}
	}

	if archJSON, ok := meta[MetaArchitecture]; ok {
		var arch []archLayer
		if err := json.Unmarshal([]byte(archJSON), &arch); err != nil {
			return bad("metadata %s is not a JSON list of layers (%v)", MetaArchitecture, err)
		}
		acts := make([]Activation, len(arch))
		for i, a := range arch {
			act, err := ParseActivation(string(a.Act))
			if err != nil {
				return bad("metadata %s: layer %d has unknown activation %q (expected \"relu\", \"identity\", \"relupow<c>\" or \"reluexp\")", MetaArchitecture, i, a.Act)
			}
			arch[i].Act = act
			acts[i] = act
		}
		want := moduleIndices(acts)
		if fmt.Sprint(want) != fmt.Sprint(idx) {
			return bad("metadata %s describes Linear modules at indices %v but the file holds them at %v", MetaArchitecture, want, idx)
		}
		for i, a := range arch {
			l := layers[i]
			if a.In != l.In() || a.Out != l.Out() || a.Bias != (l.Bias != nil) {
				return bad("metadata %s: layer %d is declared in=%d out=%d bias=%v but %s has shape [%d %d] and bias=%v",
					MetaArchitecture, i, a.In, a.Out, a.Bias, mods[idx[i]].weight, l.Out(), l.In(), l.Bias != nil)
			}
			layers[i].Act = a.Act
		}
	} else {
		if idx[0] != 0 {
			return bad("the first Linear module is %s; expected %s0.weight (modules before the first Linear are not supported)", mods[idx[0]].weight, prefix)
		}
		for i := range layers {
			layers[i].Act = Identity
			if i+1 < len(idx) {
				switch idx[i+1] - idx[i] {
				case 1:
					layers[i].Act = Identity
				case 2:
					layers[i].Act = ReLU
				default:
					return bad("modules %d and %d are %d apart: only a single ReLU may sit between Linear layers (add %s metadata to describe other architectures)",
						idx[i], idx[i+1], idx[i+1]-idx[i], MetaArchitecture)
				}
			}
		}
	}
	for i := 1; i < len(layers); i++ {
		if layers[i].In() != layers[i-1].Out() {
			return bad("layer %s takes %d inputs but %s gives %d outputs", mods[idx[i]].weight, layers[i].In(), mods[idx[i-1]].weight, layers[i-1].Out())
		}
	}
	m := &MLP{Layers: layers}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrModelFile)
	}
	return m, nil
}

func isFloat(dtype string) bool {
	return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16"
}
