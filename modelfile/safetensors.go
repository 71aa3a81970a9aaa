package modelfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/boundedio"
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
//
// This file reads the format; safetensors_write.go writes it,
// safetensors_dtype.go converts the element types, and safetensors_mlp.go turns
// tensors into an MLP and back.

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

// tensorInfo is one header entry as the JSON holds it.
type tensorInfo struct {
	DType       *string `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// stEntry is one header entry after validation.
type stEntry struct {
	name       string
	dtype      string
	shape      []int
	begin, end int64
	count      int
}

// stErrorf returns a safetensors format error wrapping ErrModelFile.
func stErrorf(format string, args ...any) error {
	return fmt.Errorf("safetensors: "+format+": %w", append(args, ErrModelFile)...)
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
	hdr, err := readSafetensorsHeader(r)
	if err != nil {
		return nil, nil, err
	}
	entries, meta, err := parseSafetensorsHeader(hdr)
	if err != nil {
		return nil, nil, err
	}
	total, err := checkTiling(entries)
	if err != nil {
		return nil, nil, err
	}
	data, err := readSafetensorsData(r, total)
	if err != nil {
		return nil, nil, err
	}
	tensors := make(map[string]Tensor, len(entries))
	for _, e := range entries {
		tensors[e.name] = Tensor{DType: e.dtype, Shape: e.shape, F64: decodeTensor(e.dtype, data[e.begin:e.end], e.count)}
	}
	return tensors, meta, nil
}

// readSafetensorsHeader reads the 8-byte header length and the JSON header
// it announces, refusing lengths over maxHeader before allocating.
func readSafetensorsHeader(r io.Reader) ([]byte, error) {
	var nb [8]byte
	if _, err := io.ReadFull(r, nb[:]); err != nil {
		if boundedio.IsEOF(err) {
			return nil, stErrorf("file shorter than the 8-byte header length")
		}
		return nil, err
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n > maxHeader {
		return nil, stErrorf("header length %d exceeds the %d-byte limit (is this a safetensors file?)", n, maxHeader)
	}
	if n < 2 {
		return nil, stErrorf("header length %d is too small for a JSON object", n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		if boundedio.IsEOF(err) {
			return nil, stErrorf("file truncated inside the %d-byte header", n)
		}
		return nil, err
	}
	return hdr, nil
}

// parseSafetensorsHeader decodes the JSON header into validated entries (in
// no particular order) and the __metadata__ map.
func parseSafetensorsHeader(hdr []byte) ([]stEntry, map[string]string, error) {
	if hdr[0] != '{' {
		return nil, nil, stErrorf("header does not start with '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, nil, stErrorf("header is not a JSON object (%v)", err)
	}
	var meta map[string]string
	entries := make([]stEntry, 0, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, nil, stErrorf("__metadata__ must map strings to strings (%v)", err)
			}
			continue
		}
		e, err := parseEntry(name, msg)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	return entries, meta, nil
}

// parseEntry validates one tensor's header entry: the three keys, the
// dtype, the offsets, the shape, and that the shape's element count times
// the dtype size is exactly the span of the offsets.
func parseEntry(name string, msg json.RawMessage) (stEntry, error) {
	var ti tensorInfo
	dec := json.NewDecoder(bytes.NewReader(msg))
	if err := dec.Decode(&ti); err != nil {
		return stEntry{}, stErrorf("tensor %q: malformed entry (%v)", name, err)
	}
	if ti.DType == nil || ti.Shape == nil || ti.DataOffsets == nil {
		return stEntry{}, stErrorf("tensor %q: entry needs \"dtype\", \"shape\" and \"data_offsets\"", name)
	}
	size, ok := dtypeSize[*ti.DType]
	if !ok {
		return stEntry{}, stErrorf("tensor %q has dtype %q; supported are F64, F32, F16, BF16 and integer/bool types (convert with tensor.double())", name, *ti.DType)
	}
	if len(ti.DataOffsets) != 2 {
		return stEntry{}, stErrorf("tensor %q: data_offsets must be [begin, end], got %d numbers", name, len(ti.DataOffsets))
	}
	e := stEntry{name: name, dtype: *ti.DType, begin: ti.DataOffsets[0], end: ti.DataOffsets[1]}
	if e.begin < 0 || e.end < e.begin {
		return stEntry{}, stErrorf("tensor %q: data_offsets [%d, %d] are not an increasing pair of non-negative offsets", name, e.begin, e.end)
	}
	e.shape = make([]int, len(ti.Shape))
	for i, s := range ti.Shape {
		if s < 0 || s > math.MaxInt32 {
			return stEntry{}, stErrorf("tensor %q: dimension %d is %d", name, i, s)
		}
		e.shape[i] = int(s)
	}
	count, err := entryCount(e, size)
	if err != nil {
		return stEntry{}, err
	}
	e.count = count
	if int64(e.count)*int64(size) != e.end-e.begin {
		return stEntry{}, stErrorf("tensor %q: shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d",
			name, e.shape, e.dtype, int64(e.count)*int64(size), e.begin, e.end, e.end-e.begin)
	}
	return e, nil
}

// entryCount returns the element count of e's shape, refusing anything that
// cannot fit its offsets (checked by division so a hostile shape cannot
// overflow).
func entryCount(e stEntry, size int) (int, error) {
	for _, s := range e.shape {
		if s == 0 {
			return 0, nil
		}
	}
	count := 1
	maxCount := (e.end - e.begin) / int64(size)
	for _, s := range e.shape {
		if int64(count) > maxCount/int64(s) {
			return 0, stErrorf("tensor %q: shape %v of %s needs more than the %d bytes of data_offsets [%d, %d]",
				e.name, e.shape, e.dtype, e.end-e.begin, e.begin, e.end)
		}
		count *= s
	}
	return count, nil
}

// checkTiling sorts entries by offset and checks that they tile [0, total)
// exactly, as the reference implementation requires: each must start where
// the previous ended. It returns total, the size of the byte buffer.
func checkTiling(entries []stEntry) (int64, error) {
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
				return 0, stErrorf("tensor %q at offsets [%d, %d] overlaps the previous tensor, which ends at %d", e.name, e.begin, e.end, total)
			}
			return 0, stErrorf("gap in the data: tensor %q starts at %d but the previous tensor ends at %d", e.name, e.begin, total)
		}
		total = e.end
	}
	return total, nil
}

// readSafetensorsData reads exactly the total-byte buffer and checks that
// nothing follows it. The buffer grows with what actually arrives, so a
// lying header cannot make us allocate more than the stream holds.
func readSafetensorsData(r io.Reader, total int64) ([]byte, error) {
	data, err := boundedio.ReadN(r, total)
	if err != nil {
		return nil, err
	}
	if got := int64(len(data)); got < total {
		return nil, stErrorf("file truncated: the header describes %d data bytes but only %d follow", total, got)
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return nil, stErrorf("unexpected bytes after the last tensor (data ends at offset %d)", total)
	}
	return data, nil
}
