package dataio

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/boundedio"
)

// The IDX format (LeCun's MNIST files, also used by Fashion-MNIST, KMNIST,
// EMNIST), usually gzipped:
//
//	2 bytes   0x00 0x00
//	1 byte    element type: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
//	          0x0D float32, 0x0E float64
//	1 byte    number of dimensions k (≥ 1)
//	k×4 bytes the dimensions, unsigned big-endian
//	rest      prod(dims) elements, big-endian, row-major
//
// The reader is our own (fuzzed, like the .npy one): every size is checked
// against the bytes that actually arrive before memory is committed, so a
// corrupt or hostile header gives an ErrFormat error, never a panic or a
// huge allocation.

// idxTypeSize maps an IDX type code to its element size in bytes.
var idxTypeSize = map[byte]int{0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}

// maxIDXDims bounds the number of dimensions; real files have 1 to 4.
const maxIDXDims = 16

// IDX is an array read from an IDX file: its shape and its elements in
// row-major order, converted to float64 without scaling (uint8 pixels stay
// 0…255).
type IDX struct {
	Dims []int
	Data []float64
}

// Matrix returns the array as a Dims[0] × prod(Dims[1:]) matrix (a 1-D array
// becomes a column), sharing Data: the first dimension indexes samples, the
// others are flattened in row-major order, as numpy's reshape(n, -1) does.
func (a *IDX) Matrix() (*mat.Dense, error) {
	if len(a.Dims) == 0 || len(a.Data) == 0 {
		return nil, fmt.Errorf("IDX array with dims %v: %w", a.Dims, ErrEmpty)
	}
	n := a.Dims[0]
	return mat.NewDense(n, len(a.Data)/n, a.Data), nil
}

// ReadIDX reads one IDX array from r, gzipped or not (detected from the gzip
// magic bytes). Corrupt, truncated or unsupported input gives an error
// wrapping ErrFormat; trailing bytes after the data are an error too, since
// they mean the header's dimensions are wrong.
func ReadIDX(r io.Reader) (*IDX, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("IDX: bad gzip stream (%v): %w", err, ErrFormat)
		}
		defer zr.Close()
		return readIDX(bufio.NewReaderSize(zr, 1<<16))
	}
	return readIDX(br)
}

// idxErrorf returns an IDX format error wrapping ErrFormat.
func idxErrorf(format string, args ...any) error {
	return fmt.Errorf("IDX: "+format+": %w", append(args, ErrFormat)...)
}

// readIDX reads one uncompressed IDX array: the header, exactly the data it
// announces (and nothing after it), then the elements.
func readIDX(r *bufio.Reader) (*IDX, error) {
	typ, dims, count, err := readIDXHeader(r)
	if err != nil {
		return nil, err
	}
	b, err := readIDXData(r, dims, count, idxTypeSize[typ])
	if err != nil {
		return nil, err
	}
	return &IDX{Dims: dims, Data: decodeIDX(typ, b, count)}, nil
}

// readIDXHeader reads the magic number, the element type and the
// dimensions, and returns the type code, the dimensions and their product
// (at most 2^31 − 1).
func readIDXHeader(r *bufio.Reader) (typ byte, dims []int, count int, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if boundedio.IsEOF(err) {
			return 0, nil, 0, idxErrorf("file shorter than the 4-byte magic number")
		}
		return 0, nil, 0, idxReadErr(err)
	}
	if hdr[0] != 0 || hdr[1] != 0 {
		return 0, nil, 0, idxErrorf("magic number starts with %#02x %#02x, expected 0x00 0x00 (is this an IDX file?)", hdr[0], hdr[1])
	}
	if _, ok := idxTypeSize[hdr[2]]; !ok {
		return 0, nil, 0, idxErrorf("unknown element type %#02x (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)", hdr[2])
	}
	k := int(hdr[3])
	if k < 1 || k > maxIDXDims {
		return 0, nil, 0, idxErrorf("%d dimensions; expected 1 to %d", k, maxIDXDims)
	}
	dims = make([]int, k)
	count = 1
	for i := range dims {
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if boundedio.IsEOF(err) {
				return 0, nil, 0, idxErrorf("file truncated inside the dimensions")
			}
			return 0, nil, 0, idxReadErr(err)
		}
		d := binary.BigEndian.Uint32(b[:])
		if d == 0 {
			return 0, nil, 0, idxErrorf("dimension %d is 0: %w", i, ErrEmpty)
		}
		if d > math.MaxInt32 || count > math.MaxInt32/int(d) {
			return 0, nil, 0, idxErrorf("dimensions %v… describe more than 2^31 elements", dims[:i+1])
		}
		dims[i] = int(d)
		count *= int(d)
	}
	return hdr[2], dims, count, nil
}

// readIDXData reads the count·size data bytes, bounded by what arrives (so
// a lying header cannot make us allocate more than the stream holds), and
// checks that nothing follows them.
func readIDXData(r *bufio.Reader, dims []int, count, size int) ([]byte, error) {
	want := int64(count) * int64(size)
	b, err := boundedio.ReadN(r, want)
	if err != nil {
		return nil, idxReadErr(err)
	}
	if got := int64(len(b)); got < want {
		return nil, idxErrorf("file truncated: dimensions %v need %d data bytes but only %d follow", dims, want, got)
	}
	if _, err := r.ReadByte(); err == nil {
		return nil, idxErrorf("unexpected bytes after the %d elements of dimensions %v", count, dims)
	} else if !errors.Is(err, io.EOF) {
		return nil, idxReadErr(err)
	}
	return b, nil
}

// decodeIDX converts count big-endian elements of IDX type typ to float64.
func decodeIDX(typ byte, b []byte, count int) []float64 {
	out := make([]float64, count)
	be := binary.BigEndian
	switch typ {
	case 0x08:
		for i := range out {
			out[i] = float64(b[i])
		}
	case 0x09:
		for i := range out {
			out[i] = float64(int8(b[i]))
		}
	case 0x0B:
		for i := range out {
			out[i] = float64(int16(be.Uint16(b[2*i:])))
		}
	case 0x0C:
		for i := range out {
			out[i] = float64(int32(be.Uint32(b[4*i:])))
		}
	case 0x0D:
		for i := range out {
			out[i] = float64(math.Float32frombits(be.Uint32(b[4*i:])))
		}
	case 0x0E:
		for i := range out {
			out[i] = math.Float64frombits(be.Uint64(b[8*i:]))
		}
	}
	return out
}

// idxReadErr classifies a read error: a corrupt gzip stream is a format
// error, anything else (an I/O failure) is passed on.
func idxReadErr(err error) error {
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("IDX: corrupt or truncated gzip stream (%v): %w", err, ErrFormat)
	}
	var ce flate.CorruptInputError
	if errors.As(err, &ce) {
		return fmt.Errorf("IDX: corrupt gzip stream (%v): %w", err, ErrFormat)
	}
	return err
}

// ReadIDXFile reads the IDX file at path (gzipped or not); see ReadIDX.
func ReadIDXFile(path string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ReadIDX(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// readIDXMatrix is ReadMatrix for IDX files.
func readIDXMatrix(path string) (*mat.Dense, error) {
	a, err := ReadIDXFile(path)
	if err != nil {
		return nil, err
	}
	m, err := a.Matrix()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
