package dataio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/boundedio"
	"github.com/relurec/relurec/internal/half"
)

// The .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0):
//
//	"\x93NUMPY" major minor
//	header length: uint16 LE (v1) or uint32 LE (v2, v3)
//	header: a Python dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
//	        padded with spaces and ending in '\n'
//	data:   prod(shape) items of descr, in C or Fortran order
//
// We parse it ourselves rather than through a general library so that every
// malformed input becomes an ErrFormat error (the parser is fuzzed) and so
// that big-endian, bool and Fortran-order files numpy writes all load.

const npyMagic = "\x93NUMPY"

// maxNPYHeader bounds the header we are willing to parse. numpy itself refuses
// headers above 10 000 bytes unless told otherwise; ours only needs a shape.
const maxNPYHeader = 1 << 20

// npyHeader is the parsed header dict.
type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
}

// dtype describes how one array element is stored.
type dtype struct {
	kind  byte // 'f', 'i', 'u', 'b'
	size  int  // bytes per element
	order binary.ByteOrder
}

// parseDescr interprets a numpy dtype string such as "<f8" or "|u1".
func parseDescr(s string) (dtype, error) {
	if len(s) < 3 {
		return dtype{}, fmt.Errorf("dtype %q is not a simple numeric dtype: %w", s, ErrFormat)
	}
	var d dtype
	switch s[0] {
	case '<', '|', '=':
		// '=' is native order; every platform numpy writes such files on
		// today is little-endian.
		d.order = binary.LittleEndian
	case '>':
		d.order = binary.BigEndian
	default:
		return dtype{}, fmt.Errorf("dtype %q has unknown byte order %q: %w", s, s[0], ErrFormat)
	}
	d.kind = s[1]
	n, err := strconv.Atoi(s[2:])
	if err != nil {
		return dtype{}, fmt.Errorf("dtype %q has a malformed item size: %w", s, ErrFormat)
	}
	d.size = n
	ok := false
	switch d.kind {
	case 'f':
		ok = n == 2 || n == 4 || n == 8
	case 'i', 'u':
		ok = n == 1 || n == 2 || n == 4 || n == 8
	case 'b':
		ok = n == 1
	}
	if !ok {
		return dtype{}, fmt.Errorf("dtype %q is not supported (expected float16/32/64, int8..int64, uint8..uint64 or bool; convert with arr.astype(np.float64)): %w", s, ErrFormat)
	}
	return d, nil
}

// decodeInto decodes len(dst) consecutive elements of b into dst. The
// common little-endian float64 and float32 take a loop of their own: the
// element-by-element decode (its byte order behind an interface) took
// ~5 ns an element, 0.12 s of reading a 240 MB .npz.
func (d dtype) decodeInto(dst []float64, b []byte) {
	switch {
	case d.kind == 'f' && d.size == 8 && d.order == binary.LittleEndian:
		b = b[:8*len(dst)]
		for i := range dst {
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case d.kind == 'f' && d.size == 4 && d.order == binary.LittleEndian:
		b = b[:4*len(dst)]
		for i := range dst {
			dst[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	default:
		for i := range dst {
			dst[i] = d.decode(b[i*d.size:])
		}
	}
}

// decode reads one element from b (len(b) ≥ d.size).
func (d dtype) decode(b []byte) float64 {
	switch d.kind {
	case 'f':
		switch d.size {
		case 2:
			return half.ToFloat64(d.order.Uint16(b))
		case 4:
			return float64(math.Float32frombits(d.order.Uint32(b)))
		default:
			return math.Float64frombits(d.order.Uint64(b))
		}
	case 'i':
		switch d.size {
		case 1:
			return float64(int8(b[0]))
		case 2:
			return float64(int16(d.order.Uint16(b)))
		case 4:
			return float64(int32(d.order.Uint32(b)))
		default:
			return float64(int64(d.order.Uint64(b)))
		}
	case 'u':
		switch d.size {
		case 1:
			return float64(b[0])
		case 2:
			return float64(d.order.Uint16(b))
		case 4:
			return float64(d.order.Uint32(b))
		default:
			return float64(d.order.Uint64(b))
		}
	default: // 'b'
		if b[0] != 0 {
			return 1
		}
		return 0
	}
}

// readNPYFile reads a .npy file from disk, decoding the data as they
// stream in, so reading takes the memory of the matrix alone (the rows
// kept, at that) rather than that of the file and the matrix. A regular
// file's size bounds every size in its header; a pipe or device is read
// without knowing its length, the matrix growing with the data that arrive.
func readNPYFile(path string, cfg readCfg) (*mat.Dense, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	total, trusted := int64(-1), false
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		total, trusted = st.Size(), true
	}
	m, err := readNPY(bufio.NewReaderSize(cfg.reader(f), 1<<16), source{total: total, trusted: trusted}, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// decodeNPY parses a complete .npy file held in memory.
func decodeNPY(b []byte) (*mat.Dense, error) {
	return readNPY(bytes.NewReader(b), source{total: int64(len(b)), trusted: true}, readCfg{})
}

// readNPY reads a .npy array from r. Only the data of the kept rows are
// read. The matrix's size is checked against the memory budget before the
// data are read, and a compressed stream whose length is only declared is
// confirmed first (source.confirm).
func readNPY(r io.Reader, src source, cfg readCfg) (*mat.Dense, error) {
	l, err := readNPYLayout(r, src.total)
	if err != nil {
		return nil, err
	}
	if src.exact && l.dataLen >= 0 {
		if need := int64(l.rows) * int64(l.cols) * int64(l.dt.size); l.dataLen != need {
			return nil, fmt.Errorf("header declares shape %v of %s (%d data bytes) but the member holds %d data bytes; the archive is corrupt or was not written by numpy: %w",
				l.hdr.shape, l.hdr.descr, need, l.dataLen, ErrFormat)
		}
	}
	keep := cfg.rowsKept(l.rows)
	if err := checkBudget(keep, l.cols); err != nil {
		return nil, err
	}
	// C order reads a prefix of the data; Fortran order interleaves the
	// kept rows with the others, so every element is read.
	need := int64(keep) * int64(l.cols) * int64(l.dt.size)
	if l.hdr.fortran {
		need = int64(l.rows) * int64(l.cols) * int64(l.dt.size)
	}
	if r, err = src.confirm(r, l.offset, need, src.exact && (keep == l.rows || l.hdr.fortran)); err != nil {
		return nil, err
	}
	return l.decode(r, src.trusted, cfg)
}

// npyLayout is what a .npy header says about the data that follow it.
type npyLayout struct {
	hdr        npyHeader
	dt         dtype
	rows, cols int
	offset     int64 // the bytes of the preamble and header, before the data
	dataLen    int64 // the bytes after the header, −1 when unknown
}

// readNPYLayout reads the preamble of a .npy stream of total bytes (−1 when
// unknown), leaving r at the first data byte. Every size in the header is
// checked against the bytes the stream holds before anything is allocated.
func readNPYLayout(r io.Reader, total int64) (npyLayout, error) {
	var pre [8 + 4]byte
	n, err := io.ReadFull(r, pre[:8])
	if err != nil && !boundedio.IsEOF(err) {
		return npyLayout{}, err
	}
	if n < 8 || string(pre[:len(npyMagic)]) != npyMagic {
		return npyLayout{}, fmt.Errorf("not a .npy file (missing the \\x93NUMPY magic; was it written with numpy.save?): %w", ErrFormat)
	}
	major, minor := pre[6], pre[7]
	lenBytes := 0
	switch major {
	case 1:
		lenBytes = 2
	case 2, 3:
		lenBytes = 4
	default:
		return npyLayout{}, fmt.Errorf(".npy format version %d.%d is not supported (expected 1.0, 2.0 or 3.0): %w", major, minor, ErrFormat)
	}
	if _, err := io.ReadFull(r, pre[8:8+lenBytes]); err != nil {
		if boundedio.IsEOF(err) {
			return npyLayout{}, fmt.Errorf(".npy file truncated in its header: %w", ErrFormat)
		}
		return npyLayout{}, err
	}
	var hlen int64
	if lenBytes == 2 {
		hlen = int64(binary.LittleEndian.Uint16(pre[8:]))
	} else if hlen = int64(binary.LittleEndian.Uint32(pre[8:])); hlen > maxNPYHeader {
		return npyLayout{}, fmt.Errorf(".npy header claims %d bytes (limit %d): %w", hlen, maxNPYHeader, ErrFormat)
	}
	remain := total - int64(8+lenBytes) // bytes after the length field
	if total >= 0 && hlen > remain {
		return npyLayout{}, fmt.Errorf(".npy header claims %d bytes but only %d remain; the file is truncated: %w", hlen, remain, ErrFormat)
	}
	text, err := boundedio.ReadN(r, hlen)
	if err != nil {
		return npyLayout{}, err
	}
	if int64(len(text)) < hlen {
		return npyLayout{}, fmt.Errorf(".npy header claims %d bytes but only %d remain; the file is truncated: %w", hlen, len(text), ErrFormat)
	}
	hdr, err := parseNPYHeader(string(text))
	if err != nil {
		return npyLayout{}, err
	}
	l := npyLayout{hdr: hdr, offset: int64(8+lenBytes) + hlen}
	if l.dt, err = parseDescr(hdr.descr); err != nil {
		return npyLayout{}, err
	}
	switch len(hdr.shape) {
	case 0:
		l.rows, l.cols = 1, 1
	case 1:
		l.rows, l.cols = hdr.shape[0], 1
	case 2:
		l.rows, l.cols = hdr.shape[0], hdr.shape[1]
	default:
		return npyLayout{}, fmt.Errorf("array has shape %v; expected a 2-D array (samples × features) or 1-D: reshape it with arr.reshape(len(arr), -1): %w", hdr.shape, ErrFormat)
	}
	if l.rows == 0 || l.cols == 0 {
		return npyLayout{}, fmt.Errorf("array has shape %v: %w", hdr.shape, ErrEmpty)
	}
	l.dataLen = -1
	if total < 0 {
		return l, nil
	}
	// Check the element count against the bytes present, dividing rather
	// than multiplying so that absurd shapes cannot overflow.
	dataLen := remain - hlen
	l.dataLen = dataLen
	avail := dataLen / int64(l.dt.size)
	if int64(l.rows) > avail || int64(l.cols) > avail/int64(l.rows) {
		return npyLayout{}, fmt.Errorf("header declares shape %v of %s (%s bytes) but only %d data bytes follow; the file is truncated: %w",
			hdr.shape, hdr.descr, mulString(l.rows, l.cols, l.dt.size), dataLen, ErrFormat)
	}
	return l, nil
}

// decode reads the elements of the kept rows from r, in C or Fortran
// order, into a new matrix, allocated at once when the stream is trusted
// (its length confirmed), else grown with the data that arrive.
func (l npyLayout) decode(r io.Reader, trusted bool, cfg readCfg) (*mat.Dense, error) {
	rows, cols, size := l.rows, l.cols, l.dt.size
	keep := cfg.rowsKept(rows)
	need := keep * cols
	if l.hdr.fortran {
		need = rows * cols
	}
	var out []float64
	switch {
	case l.hdr.fortran:
		out = make([]float64, keep*cols)
	case trusted:
		out = make([]float64, 0, keep*cols)
	default:
		out = make([]float64, 0, min(keep*cols, growChunk))
	}
	buf := make([]byte, (1<<16/size)*size)
	i, j := 0, 0 // the row and column of the next element, for Fortran order
	for k := 0; k < need; {
		chunk := min(len(buf)/size, need-k)
		if got, err := io.ReadFull(r, buf[:chunk*size]); err != nil {
			if boundedio.IsEOF(err) {
				return nil, fmt.Errorf("header declares shape %v of %s but the data end after %d of its %d elements; the file is truncated: %w",
					l.hdr.shape, l.hdr.descr, k+got/size, rows*cols, ErrFormat)
			}
			return nil, err
		}
		if !l.hdr.fortran {
			out = reserve(out, chunk, need)
			at := len(out)
			out = out[:at+chunk]
			l.dt.decodeInto(out[at:], buf)
		} else {
			// Column-major: item k is element (k mod rows, k div rows).
			for q := 0; q < chunk; q++ {
				if i < keep {
					out[i*cols+j] = l.dt.decode(buf[q*size:])
				}
				if i++; i == rows {
					i, j = 0, j+1
				}
			}
		}
		k += chunk
	}
	return mat.NewDense(keep, cols, out), nil
}

// mulString formats a*b*c without overflowing.
func mulString(a, b, c int) string {
	f := float64(a) * float64(b) * float64(c)
	if f < 1<<53 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// parseNPYHeader parses the Python dict literal of a .npy header. It accepts
// exactly what numpy writes (and a little more: double quotes, any key order,
// Python 2 "L" suffixes), nothing that would need a Python evaluator.
func parseNPYHeader(s string) (npyHeader, error) {
	p := &pyParser{s: s}
	bad := func(what string) (npyHeader, error) {
		return npyHeader{}, fmt.Errorf(".npy header %q: %s: %w", truncate(s, 120), what, ErrFormat)
	}
	p.space()
	if !p.eat('{') {
		return bad("expected a dict starting with '{'")
	}
	var h npyHeader
	seen := map[string]bool{}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, ok := p.str()
		if !ok {
			return bad("expected a quoted key")
		}
		p.space()
		if !p.eat(':') {
			return bad("expected ':' after key " + key)
		}
		p.space()
		switch key {
		case "descr":
			v, ok := p.str()
			if !ok {
				return bad("'descr' is not a simple dtype string (structured and sub-array dtypes are not supported; convert with arr.astype(np.float64))")
			}
			h.descr = v
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
				h.fortran = false
			default:
				return bad("'fortran_order' must be True or False")
			}
		case "shape":
			sh, ok := p.tuple()
			if !ok {
				return bad("'shape' must be a tuple of non-negative integers")
			}
			h.shape = sh
		default:
			return bad("unexpected key " + strconv.Quote(key))
		}
		seen[key] = true
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return bad("expected ',' or '}'")
		}
		break
	}
	p.space()
	if p.i != len(p.s) {
		return bad("unexpected text after the dict")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return bad("missing key '" + k + "'")
		}
	}
	return h, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pyParser is a tiny cursor over a Python literal.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n\x00", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// str parses a single- or double-quoted string without escapes (numpy's
// keys and simple dtype strings never need them).
func (p *pyParser) str() (string, bool) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	p.i += end + 2
	return v, true
}

// tuple parses "()", "(3,)", "(3, 4)" and so on.
func (p *pyParser) tuple() ([]int, bool) {
	if !p.eat('(') {
		return nil, false
	}
	shape := []int{}
	for {
		p.space()
		if p.eat(')') {
			return shape, true
		}
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if p.i == start || p.i-start > 18 {
			return nil, false
		}
		v, err := strconv.Atoi(p.s[start:p.i])
		if err != nil {
			return nil, false
		}
		p.eat('L')
		shape = append(shape, v)
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if p.eat(')') {
			return shape, true
		}
		return nil, false
	}
}

// encodeNPY writes m as a version 1.0, C-order, little-endian float64 array,
// which every numpy since 1.0 loads.
func encodeNPY(w io.Writer, m *mat.Dense) error {
	r, c := m.Dims()
	dict := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", r, c)
	// numpy pads so that the data starts on a 64-byte boundary; the header
	// ends with '\n'.
	total := len(npyMagic) + 2 + 2 + len(dict) + 1
	pad := (64 - total%64) % 64
	hdr := dict + strings.Repeat(" ", pad) + "\n"
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.WriteString(npyMagic)
	bw.Write([]byte{1, 0})
	var l [2]byte
	binary.LittleEndian.PutUint16(l[:], uint16(len(hdr)))
	bw.Write(l[:])
	bw.WriteString(hdr)
	var buf [8]byte
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(m.At(i, j)))
			bw.Write(buf[:])
		}
	}
	return bw.Flush()
}

// WriteNPY writes m to path as a float64 .npy file (format 1.0, C order,
// '<f8'), loadable with numpy.load. The write is atomic: on failure any
// existing file at path is left untouched.
func WriteNPY(path string, m *mat.Dense) error {
	if err := checkWritable(m); err != nil {
		return err
	}
	return AtomicWriteFile(path, func(w io.Writer) error { return encodeNPY(w, m) })
}

// checkWritable rejects a nil or empty matrix before a file is created.
func checkWritable(m *mat.Dense) error {
	if m == nil || m.IsEmpty() {
		return fmt.Errorf("dataio: cannot write a nil or empty matrix: %w", ErrEmpty)
	}
	return nil
}
