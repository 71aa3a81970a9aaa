package modelfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

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
	names, err := checkWritable(tensors, dtype)
	if err != nil {
		return err
	}
	hdr := safetensorsHeader(tensors, names, meta, dtype)
	bw := bufio.NewWriterSize(w, 1<<16)
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], uint64(len(hdr)))
	bw.Write(nb[:])
	bw.Write(hdr)
	writeTensorData(bw, tensors, names, dtype)
	return bw.Flush()
}

// checkWritable checks every tensor's name, shape, value count and (for F32)
// range, and returns the names sorted.
func checkWritable(tensors map[string]Tensor, dtype string) ([]string, error) {
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		if name == "" || name == "__metadata__" {
			return nil, fmt.Errorf("safetensors: %q is not a valid tensor name", name)
		}
		count := 1
		for _, s := range t.Shape {
			if s < 0 {
				return nil, fmt.Errorf("safetensors: tensor %q has negative dimension in shape %v", name, t.Shape)
			}
			count *= s
		}
		if count != len(t.F64) {
			return nil, fmt.Errorf("safetensors: tensor %q has shape %v (%d elements) but %d values", name, t.Shape, count, len(t.F64))
		}
		if dtype == "F32" {
			for i, v := range t.F64 {
				if !math.IsInf(v, 0) && math.IsInf(float64(float32(v)), 0) {
					return nil, fmt.Errorf("safetensors: tensor %q element %d = %g overflows float32; save as F64", name, i, v)
				}
			}
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// safetensorsHeader returns the compact JSON header, __metadata__ first
// (keys sorted), then the tensors in the order of names with contiguous
// offsets, padded with spaces to a multiple of 8 bytes.
func safetensorsHeader(tensors map[string]Tensor, names []string, meta map[string]string, dtype string) []byte {
	size := dtypeSize[dtype]
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
	return h.Bytes()
}

// writeTensorData writes the values of the named tensors, in order, as
// little-endian dtype ("F64" or "F32") elements. Write errors surface at the
// caller's Flush.
func writeTensorData(bw *bufio.Writer, tensors map[string]Tensor, names []string, dtype string) {
	size := dtypeSize[dtype]
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
