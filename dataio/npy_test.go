package dataio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// makeNPY builds a .npy file by hand, independently of encodeNPY: values are
// given in C order and stored as descr in the requested memory order.
func makeNPY(t testing.TB, version byte, descr string, fortran bool, shape []int, values []float64) []byte {
	t.Helper()
	dt, err := parseDescr(descr)
	if err != nil {
		t.Fatal(err)
	}
	shp := "("
	for i, s := range shape {
		if i > 0 {
			shp += ", "
		}
		shp += fmt.Sprint(s)
	}
	if len(shape) == 1 {
		shp += ","
	}
	shp += ")"
	fo := "False"
	if fortran {
		fo = "True"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fo, shp)
	pre := 10
	if version > 1 {
		pre = 12
	}
	pad := (64 - (pre+len(dict)+1)%64) % 64
	hdr := dict + strings.Repeat(" ", pad) + "\n"
	var b bytes.Buffer
	b.WriteString(npyMagic)
	b.Write([]byte{version, 0})
	if version == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	}
	b.WriteString(hdr)

	// Memory order: for Fortran, emit columns first.
	order := make([]int, len(values))
	for k := range order {
		order[k] = k
	}
	if fortran && len(shape) == 2 {
		r, c := shape[0], shape[1]
		k := 0
		for j := 0; j < c; j++ {
			for i := 0; i < r; i++ {
				order[k] = i*c + j
				k++
			}
		}
	}
	item := make([]byte, dt.size)
	for _, k := range order {
		v := values[k]
		switch dt.kind {
		case 'f':
			switch dt.size {
			case 2:
				dt.order.PutUint16(item, float64ToFloat16(v))
			case 4:
				dt.order.PutUint32(item, math.Float32bits(float32(v)))
			case 8:
				dt.order.PutUint64(item, math.Float64bits(v))
			}
		case 'i', 'u':
			u := uint64(int64(v))
			switch dt.size {
			case 1:
				item[0] = byte(u)
			case 2:
				dt.order.PutUint16(item, uint16(u))
			case 4:
				dt.order.PutUint32(item, uint32(u))
			case 8:
				dt.order.PutUint64(item, u)
			}
		case 'b':
			item[0] = 0
			if v != 0 {
				item[0] = 1
			}
		}
		b.Write(item)
	}
	return b.Bytes()
}

// float64ToFloat16 handles the exactly representable values the tests use.
func float64ToFloat16(v float64) uint16 {
	if v == 0 {
		return 0
	}
	var sign uint16
	if v < 0 {
		sign = 0x8000
		v = -v
	}
	frac, exp := math.Frexp(v) // v = frac·2^exp, frac in [0.5,1)
	e := exp - 1 + 15
	m := uint16((frac*2 - 1) * 1024)
	return sign | uint16(e)<<10 | m
}

func denseEqual(t *testing.T, got *mat.Dense, r, c int, want []float64) {
	t.Helper()
	gr, gc := got.Dims()
	if gr != r || gc != c {
		t.Fatalf("shape %d×%d, want %d×%d", gr, gc, r, c)
	}
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if g, w := got.At(i, j), want[i*c+j]; g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Fatalf("[%d,%d] = %v, want %v", i, j, g, w)
			}
		}
	}
}

func TestNPYDtypesOrders(t *testing.T) {
	// Values every dtype can hold exactly (bool gets 0/1).
	ints := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100}
	signed := []float64{0, -1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -100}
	floats := []float64{0.5, -1.25, 2, 3.75, -4, 5.5, 6, -7.125, 8, 9.5, -10, 0.25}
	bools := []float64{1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1}
	cases := []struct {
		descr  string
		values []float64
	}{
		{"f2", floats}, {"f4", floats}, {"f8", floats},
		{"i1", signed}, {"i2", signed}, {"i4", signed}, {"i8", signed},
		{"u1", ints}, {"u2", ints}, {"u4", ints}, {"u8", ints},
		{"b1", bools},
	}
	for _, tc := range cases {
		for _, endian := range []string{"<", ">", "|"} {
			for _, fortran := range []bool{false, true} {
				for _, version := range []byte{1, 2} {
					name := fmt.Sprintf("%s%s/fortran=%v/v%d", endian, tc.descr, fortran, version)
					t.Run(name, func(t *testing.T) {
						b := makeNPY(t, version, endian+tc.descr, fortran, []int{3, 4}, tc.values)
						m, err := decodeNPY(b)
						if err != nil {
							t.Fatal(err)
						}
						denseEqual(t, m, 3, 4, tc.values)
					})
				}
			}
		}
	}
}

func TestNPYShapes(t *testing.T) {
	v := []float64{1, 2, 3}
	m, err := decodeNPY(makeNPY(t, 1, "<f8", false, []int{3}, v))
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, m, 3, 1, v)

	m, err = decodeNPY(makeNPY(t, 1, "<f8", false, []int{}, []float64{7}))
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, m, 1, 1, []float64{7})

	_, err = decodeNPY(makeNPY(t, 1, "<f8", false, []int{2, 1, 1}, []float64{1, 2}))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "reshape") {
		t.Fatalf("3-D array: got %v, want ErrFormat suggesting reshape", err)
	}
	_, err = decodeNPY(makeNPY(t, 1, "<f8", false, []int{0, 3}, nil))
	if !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty array: got %v, want ErrEmpty", err)
	}
}

func TestWriteNPYRoundTrip(t *testing.T) {
	dir := t.TempDir()
	vals := []float64{0, math.Copysign(0, -1), 1e-310, math.MaxFloat64, -math.SmallestNonzeroFloat64, math.Pi, math.Inf(1), math.NaN()}
	m := mat.NewDense(2, 4, vals)
	for _, name := range []string{"a.npy", "b.NPY"} {
		p := filepath.Join(dir, name)
		if err := WriteNPY(p, m); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMatrix(p, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range vals {
			if math.Float64bits(got.RawMatrix().Data[i]) != math.Float64bits(vals[i]) {
				t.Fatalf("item %d: bits differ: %v vs %v", i, got.RawMatrix().Data[i], vals[i])
			}
		}
	}
	// A view (stride ≠ cols) writes only its own elements.
	big := mat.NewDense(3, 3, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
	view := big.Slice(1, 3, 1, 3).(*mat.Dense)
	p := filepath.Join(dir, "view.npy")
	if err := WriteNPY(p, view); err != nil {
		t.Fatal(err)
	}
	got, err := ReadMatrix(p, "")
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, got, 2, 2, []float64{5, 6, 8, 9})

	if err := WriteNPY(filepath.Join(dir, "nil.npy"), nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("nil matrix: %v", err)
	}
}

func TestWriteNPYLayout(t *testing.T) {
	var b bytes.Buffer
	if err := encodeNPY(&b, mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})); err != nil {
		t.Fatal(err)
	}
	raw := b.Bytes()
	if string(raw[:8]) != "\x93NUMPY\x01\x00" {
		t.Fatalf("magic/version: %q", raw[:8])
	}
	hlen := int(binary.LittleEndian.Uint16(raw[8:10]))
	if (10+hlen)%64 != 0 {
		t.Errorf("data starts at %d, not 64-byte aligned", 10+hlen)
	}
	hdr := string(raw[10 : 10+hlen])
	if !strings.HasPrefix(hdr, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }") || !strings.HasSuffix(hdr, "\n") {
		t.Errorf("header %q", hdr)
	}
	if len(raw) != 10+hlen+6*8 {
		t.Errorf("file length %d", len(raw))
	}
	if v := math.Float64frombits(binary.LittleEndian.Uint64(raw[10+hlen+8:])); v != 2 {
		t.Errorf("second item %v, want 2 (C order)", v)
	}
}

func TestNPYCorrupt(t *testing.T) {
	good := makeNPY(t, 1, "<f4", false, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	// Every strict prefix is truncated and must be rejected with ErrFormat.
	for n := 0; n < len(good); n++ {
		if _, err := decodeNPY(good[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix of %d bytes: got %v, want ErrFormat", n, err)
		}
	}
	hdr := func(dict string) []byte {
		var b bytes.Buffer
		b.WriteString("\x93NUMPY\x01\x00")
		binary.Write(&b, binary.LittleEndian, uint16(len(dict)))
		b.WriteString(dict)
		b.Write(make([]byte, 64))
		return b.Bytes()
	}
	bad := map[string][]byte{
		"magic":        append([]byte("\x93NUMPX"), good[6:]...),
		"version":      append([]byte("\x93NUMPY\x09\x00"), good[8:]...),
		"complex":      hdr("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }"),
		"object":       hdr("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"),
		"structured":   hdr("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }"),
		"fortran":      hdr("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1,), }"),
		"negative":     hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"),
		"missing":      hdr("{'descr': '<f8', 'shape': (1,), }"),
		"unknown key":  hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}"),
		"not a dict":   hdr("['descr']"),
		"huge shape":   hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (999999999999, 999999999999), }"),
		"trailing":     hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), } x"),
		"bad size":     hdr("{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }"),
		"v2 huge hlen": []byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{"),
	}
	for name, b := range bad {
		if _, err := decodeNPY(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want ErrFormat", name, err)
		}
	}
	// Through the file API too.
	p := filepath.Join(t.TempDir(), "trunc.npy")
	os.WriteFile(p, good[:len(good)-1], 0o644)
	if _, err := ReadMatrix(p, ""); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated file: %v", err)
	}
}

func TestReadMatrixExtension(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.txt")
	os.WriteFile(p, []byte("1,2\n"), 0o644)
	if _, err := ReadMatrix(p, ""); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), ".npy, .npz or .csv") {
		t.Fatalf("unknown extension: %v", err)
	}
	if _, err := ReadMatrix(filepath.Join(dir, "missing.npy"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// FuzzReadNPY checks that no input makes the .npy reader panic, and that
// whatever it accepts has the shape its header announced.
func FuzzReadNPY(f *testing.F) {
	f.Add(makeNPY(f, 1, "<f8", false, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6}))
	f.Add(makeNPY(f, 1, ">f4", true, []int{2, 2}, []float64{1, 2, 3, 4}))
	f.Add(makeNPY(f, 2, "<i8", false, []int{3}, []float64{1, 2, 3}))
	f.Add(makeNPY(f, 1, "|u1", false, []int{}, []float64{7}))
	f.Add(makeNPY(f, 1, "|b1", true, []int{1, 2}, []float64{1, 0}))
	f.Add(makeNPY(f, 1, "<f2", false, []int{1, 1}, []float64{0.5}))
	f.Add([]byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<f8'}"))
	f.Add([]byte("\x93NUMPY\x03\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeNPY(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error not wrapping ErrFormat/ErrEmpty: %v", err)
			}
			return
		}
		r, c := m.Dims()
		if r <= 0 || c <= 0 || r*c > len(b) {
			t.Fatalf("accepted %d×%d from %d bytes", r, c, len(b))
		}
		// Read as a stream of unknown length (a pipe, an .npz member) and
		// with a row limit, the same file gives the same rows.
		s, err := readNPY(bytes.NewReader(b), source{total: -1}, readCfg{maxRows: 2})
		if err != nil {
			t.Fatalf("decodes in memory but not as a stream: %v", err)
		}
		if want := m.Slice(0, min(r, 2), 0, c); !mat.EqualApprox(s, want, 0) && !(hasNaN(s) && hasNaN(want)) {
			t.Fatalf("stream read differs:\n%v\nwant\n%v", mat.Formatted(s), mat.Formatted(want))
		}
	})
}

// hasNaN reports whether m holds a NaN (NaN ≠ NaN defeats equality checks).
func hasNaN(m mat.Matrix) bool {
	r, c := m.Dims()
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if v := m.At(i, j); v != v {
				return true
			}
		}
	}
	return false
}
