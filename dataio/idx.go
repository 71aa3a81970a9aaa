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
// they mean the header's dimensions are wrong. Since a stream's length is
// not known in advance, the array grows with the data that arrive, so a
// header that lies costs nothing; ReadIDXFile, knowing the file's size,
// refuses such a header at once.
func ReadIDX(r io.Reader) (*IDX, error) {
	return readIDXStream(r, source{total: -1}, readCfg{})
}

// readIDXStream reads an IDX array, gzipped or not, from r, described by
// src: the IDX data's size if known, and for a file, how to read it again
// from its start. A gzipped stream's size is only what its trailer
// declares, so its array is confirmed (source.confirm) before it is
// allocated.
func readIDXStream(r io.Reader, src source, cfg readCfg) (*IDX, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("IDX: bad gzip stream (%v): %w", err, ErrFormat)
		}
		defer zr.Close()
		src.trusted = false
		if raw := src.reopen; raw != nil {
			src.reopen = func() (io.Reader, error) {
				r, err := raw()
				if err != nil {
					return nil, err
				}
				zr, err := gzip.NewReader(bufio.NewReaderSize(r, 1<<16))
				if err != nil {
					return nil, fmt.Errorf("IDX: bad gzip stream (%v): %w", err, ErrFormat)
				}
				return bufio.NewReaderSize(zr, 1<<16), nil
			}
		}
		return readIDX(bufio.NewReaderSize(zr, 1<<16), src, cfg)
	}
	return readIDX(br, src, cfg)
}

// idxErrorf returns an IDX format error wrapping ErrFormat.
func idxErrorf(format string, args ...any) error {
	return fmt.Errorf("IDX: "+format+": %w", append(args, ErrFormat)...)
}

// readIDX reads one uncompressed IDX array of src.total bytes (−1 if
// unknown): the header, the data it announces (those of the kept rows),
// and, when all rows are kept, checks that nothing follows.
func readIDX(r *bufio.Reader, src source, cfg readCfg) (*IDX, error) {
	typ, dims, count, err := readIDXHeader(r)
	if err != nil {
		return nil, err
	}
	esize := idxTypeSize[typ]
	want := int64(count) * int64(esize)
	if size := src.total; size >= 0 {
		// The header's dimensions must describe exactly the bytes present.
		if have := size - int64(4+4*len(dims)); want != have {
			return nil, idxErrorf("dimensions %v declare %d data bytes but the file holds %d (%s)", dims, want, max(have, 0), idxSizeVerdict(want, have))
		}
	}
	keep := cfg.rowsKept(dims[0])
	inner := count / dims[0]
	if err := checkBudget(keep, inner); err != nil {
		return nil, fmt.Errorf("IDX: %w", err)
	}
	need := keep * inner
	confirmed, err := src.confirm(r, int64(4+4*len(dims)), int64(need)*int64(esize), keep == dims[0])
	if err != nil {
		if errors.Is(err, ErrFormat) {
			return nil, fmt.Errorf("IDX: %w", err)
		}
		return nil, idxReadErr(err)
	}
	r = bufio.NewReaderSize(confirmed, 1<<16)
	// A trusted size (a plain file's, or a gzip stream's once confirmed)
	// is allocated at once; otherwise the array grows with the data that
	// arrive.
	var out []float64
	if src.trusted {
		out = make([]float64, 0, need)
	} else {
		out = make([]float64, 0, min(need, growChunk))
	}
	buf := make([]byte, (1<<16/esize)*esize)
	for len(out) < need {
		chunk := min(len(buf)/esize, need-len(out))
		if got, err := io.ReadFull(r, buf[:chunk*esize]); err != nil {
			if boundedio.IsEOF(err) {
				return nil, idxErrorf("file truncated: dimensions %v declare %d data bytes but the data end after %d", dims, want, int64(len(out)*esize+got))
			}
			return nil, idxReadErr(err)
		}
		out = appendIDX(reserve(out, chunk, need), typ, buf[:chunk*esize])
	}
	if keep == dims[0] {
		if _, err := r.ReadByte(); err == nil {
			return nil, idxErrorf("unexpected bytes after the %d elements of dimensions %v", count, dims)
		} else if !errors.Is(err, io.EOF) {
			return nil, idxReadErr(err)
		}
	}
	dims[0] = keep
	return &IDX{Dims: dims, Data: out}, nil
}

// idxSizeVerdict says which way a header's size is wrong.
func idxSizeVerdict(want, have int64) string {
	if want > have {
		return "the file is truncated or its header is wrong"
	}
	return "the header's dimensions are too small for the data"
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

// appendIDX appends the big-endian elements of IDX type typ held in b,
// converted to float64, to out.
func appendIDX(out []float64, typ byte, b []byte) []float64 {
	be := binary.BigEndian
	switch typ {
	case 0x08:
		for _, v := range b {
			out = append(out, float64(v))
		}
	case 0x09:
		for _, v := range b {
			out = append(out, float64(int8(v)))
		}
	case 0x0B:
		for i := 0; i < len(b); i += 2 {
			out = append(out, float64(int16(be.Uint16(b[i:]))))
		}
	case 0x0C:
		for i := 0; i < len(b); i += 4 {
			out = append(out, float64(int32(be.Uint32(b[i:]))))
		}
	case 0x0D:
		for i := 0; i < len(b); i += 4 {
			out = append(out, float64(math.Float32frombits(be.Uint32(b[i:]))))
		}
	case 0x0E:
		for i := 0; i < len(b); i += 8 {
			out = append(out, math.Float64frombits(be.Uint64(b[i:])))
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
// The file's size (for a gzipped file, the uncompressed size its gzip
// trailer records) must match the header's dimensions, so a header that
// lies is refused before anything is allocated. A gzipped file is
// decompressed twice: once to confirm that it holds what its header and
// trailer declare, then into an array allocated once at its final size.
func ReadIDXFile(path string) (*IDX, error) {
	return readIDXFile(path, readCfg{})
}

func readIDXFile(path string, cfg readCfg) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src := source{total: -1}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		src = source{total: idxUncompressedSize(f), trusted: true, reopen: func() (io.Reader, error) {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			return cfg.reader(f), nil
		}}
	}
	a, err := readIDXStream(cfg.reader(f), src, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// maxDeflateRatio bounds how many bytes deflate can expand one compressed
// byte into (RFC 1951's longest match, 258 bytes, in about 2 bits).
const maxDeflateRatio = 1032

// idxUncompressedSize returns the size of f's IDX data once decompressed,
// or −1 when it cannot be known without reading it all. For a plain file
// that is its size; for a gzip file the ISIZE field of its trailer (the
// uncompressed size modulo 2^32), which is exact when the file is too small
// to inflate past 4 GiB. f is left at its start.
func idxUncompressedSize(f *os.File) int64 {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || magic != [2]byte{0x1f, 0x8b} {
		return st.Size()
	}
	if st.Size() < 18 || st.Size() > (1<<32-1)/maxDeflateRatio {
		return -1
	}
	var isize [4]byte
	if _, err := f.ReadAt(isize[:], st.Size()-4); err != nil {
		return -1
	}
	return int64(binary.LittleEndian.Uint32(isize[:]))
}

// readIDXMatrix is ReadMatrix for IDX files.
func readIDXMatrix(path string, cfg readCfg) (*mat.Dense, error) {
	a, err := readIDXFile(path, cfg)
	if err != nil {
		return nil, err
	}
	m, err := a.Matrix()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
