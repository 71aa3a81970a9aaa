package dataio

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"gonum.org/v1/gonum/mat"
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

func readIDX(r *bufio.Reader) (*IDX, error) {
	bad := func(format string, args ...any) (*IDX, error) {
		return nil, fmt.Errorf("IDX: "+format+": %w", append(args, ErrFormat)...)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if isEOF(err) {
			return bad("file shorter than the 4-byte magic number")
		}
		return nil, idxReadErr(err)
	}
	if hdr[0] != 0 || hdr[1] != 0 {
		return bad("magic number starts with %#02x %#02x, expected 0x00 0x00 (is this an IDX file?)", hdr[0], hdr[1])
	}
	size, ok := idxTypeSize[hdr[2]]
	if !ok {
		return bad("unknown element type %#02x (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)", hdr[2])
	}
	k := int(hdr[3])
	if k < 1 || k > maxIDXDims {
		return bad("%d dimensions; expected 1 to %d", k, maxIDXDims)
	}
	dims := make([]int, k)
	count := 1
	for i := range dims {
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if isEOF(err) {
				return bad("file truncated inside the dimensions")
			}
			return nil, idxReadErr(err)
		}
		d := binary.BigEndian.Uint32(b[:])
		if d == 0 {
			return bad("dimension %d is 0: %w", i, ErrEmpty)
		}
		if d > math.MaxInt32 || count > math.MaxInt32/int(d) {
			return bad("dimensions %v… describe more than 2^31 elements", dims[:i+1])
		}
		dims[i] = int(d)
		count *= int(d)
	}
	// Read what arrives, bounded by what the header promises, so a lying
	// header cannot make us allocate more than the stream holds.
	var buf bytes.Buffer
	want := int64(count) * int64(size)
	got, err := io.Copy(&buf, io.LimitReader(r, want))
	if err != nil {
		return nil, idxReadErr(err)
	}
	if got < want {
		return bad("file truncated: dimensions %v need %d data bytes but only %d follow", dims, want, got)
	}
	if _, err := r.ReadByte(); err == nil {
		return bad("unexpected bytes after the %d elements of dimensions %v", count, dims)
	} else if !errors.Is(err, io.EOF) {
		return nil, idxReadErr(err)
	}
	b := buf.Bytes()
	out := make([]float64, count)
	be := binary.BigEndian
	switch hdr[2] {
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
	return &IDX{Dims: dims, Data: out}, nil
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

func isEOF(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }

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
