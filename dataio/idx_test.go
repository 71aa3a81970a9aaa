package dataio

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// makeIDX builds an IDX stream by hand.
func makeIDX(typ byte, dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, typ, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(payload)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func TestReadIDXTypes(t *testing.T) {
	be := binary.BigEndian
	i16 := make([]byte, 4)
	be.PutUint16(i16, uint16(0xFFFF)) // -1
	be.PutUint16(i16[2:], 300)
	i32 := make([]byte, 8)
	be.PutUint32(i32, uint32(0xFFFFFFFE)) // -2
	be.PutUint32(i32[4:], 70000)
	f32 := make([]byte, 8)
	be.PutUint32(f32, math.Float32bits(1.5))
	be.PutUint32(f32[4:], math.Float32bits(-0.25))
	f64 := make([]byte, 16)
	be.PutUint64(f64, math.Float64bits(math.Pi))
	be.PutUint64(f64[8:], math.Float64bits(-1e300))
	cases := []struct {
		typ  byte
		data []byte
		want []float64
	}{
		{0x08, []byte{0, 255}, []float64{0, 255}},
		{0x09, []byte{0x80, 5}, []float64{-128, 5}},
		{0x0B, i16, []float64{-1, 300}},
		{0x0C, i32, []float64{-2, 70000}},
		{0x0D, f32, []float64{1.5, -0.25}},
		{0x0E, f64, []float64{math.Pi, -1e300}},
	}
	for _, c := range cases {
		raw := makeIDX(c.typ, []uint32{2}, c.data)
		for _, stream := range [][]byte{raw, gz(raw)} {
			a, err := ReadIDX(bytes.NewReader(stream))
			if err != nil {
				t.Fatalf("type %#x: %v", c.typ, err)
			}
			if len(a.Dims) != 1 || a.Dims[0] != 2 || a.Data[0] != c.want[0] || a.Data[1] != c.want[1] {
				t.Fatalf("type %#x: got %v %v, want %v", c.typ, a.Dims, a.Data, c.want)
			}
		}
	}
}

func TestReadIDXImagesShape(t *testing.T) {
	// 3 images of 2×2, row-major: image i pixel (r, c) = 10i + 2r + c.
	var payload []byte
	for i := 0; i < 3; i++ {
		for p := 0; p < 4; p++ {
			payload = append(payload, byte(10*i+p))
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "imgs-idx3-ubyte.gz")
	if err := os.WriteFile(path, gz(makeIDX(0x08, []uint32{3, 2, 2}, payload)), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMatrix(path, "")
	if err != nil {
		t.Fatal(err)
	}
	r, c := m.Dims()
	if r != 3 || c != 4 || m.At(2, 3) != 23 || m.At(1, 2) != 12 {
		t.Fatalf("got %d×%d, m[2,3]=%v m[1,2]=%v", r, c, m.At(2, 3), m.At(1, 2))
	}
}

func TestReadIDXBad(t *testing.T) {
	good := makeIDX(0x08, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	cases := map[string][]byte{
		"empty":         {},
		"short magic":   {0, 0},
		"bad magic":     append([]byte{1}, good[1:]...),
		"bad type":      makeIDX(0x07, []uint32{2}, []byte{1, 2}),
		"zero dims":     {0, 0, 8, 0},
		"too many dims": {0, 0, 8, 200},
		"truncated dim": good[:6],
		"truncated":     good[:len(good)-1],
		"trailing":      append(append([]byte{}, good...), 7),
		"zero size":     makeIDX(0x08, []uint32{0, 3}, nil),
		"huge":          makeIDX(0x0E, []uint32{1 << 31, 1 << 31}, nil),
		"bad gzip":      append([]byte{0x1f, 0x8b}, good...),
		"truncated gz":  gz(good)[:12],
	}
	for name, b := range cases {
		_, err := ReadIDX(bytes.NewReader(b))
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want ErrFormat", name, err)
		}
	}
}

func FuzzReadIDX(f *testing.F) {
	f.Add(makeIDX(0x08, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6}))
	f.Add(gz(makeIDX(0x0D, []uint32{1}, []byte{0, 0, 0, 0})))
	f.Add([]byte{0, 0, 0x0E, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadIDX(bytes.NewReader(b))
		if err != nil {
			return
		}
		n := 1
		for _, d := range a.Dims {
			n *= d
		}
		if n != len(a.Data) {
			t.Fatalf("dims %v but %d values", a.Dims, len(a.Data))
		}
		if _, err := a.Matrix(); err != nil {
			t.Fatal(err)
		}
		// The same bytes as a file (whose size, or gzip trailer, is checked
		// against the header first) give the same array.
		path := filepath.Join(t.TempDir(), "f-ubyte")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		fa, err := ReadIDXFile(path)
		if err != nil {
			t.Fatalf("reads as a stream but not as a file: %v", err)
		}
		if !slices.Equal(fa.Dims, a.Dims) || len(fa.Data) != len(a.Data) {
			t.Fatalf("file read gives dims %v, stream read %v", fa.Dims, a.Dims)
		}
	})
}

// TestFashionMNIST reads the real files when installed (CI runs
// scripts/install-datasets.sh first); elsewhere it skips.
func TestFashionMNIST(t *testing.T) {
	if err := FashionMNISTAvailable(""); err != nil {
		t.Skipf("Fashion-MNIST not installed (run scripts/install-datasets.sh): %v", err)
	}
	test, err := LoadFashionMNIST("", "test")
	if err != nil {
		t.Fatal(err)
	}
	r, c := test.X.Dims()
	if r != 10000 || c != 784 || len(test.Labels) != 10000 {
		t.Fatalf("test split is %d×%d with %d labels", r, c, len(test.Labels))
	}
	counts := make([]int, 10)
	for _, l := range test.Labels {
		counts[l]++
	}
	for k, n := range counts {
		if n != 1000 {
			t.Fatalf("class %d has %d test images, want 1000", k, n)
		}
	}
	lo, hi := 1.0, 0.0
	for _, v := range test.X.RawMatrix().Data {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if lo != 0 || hi != 1 {
		t.Fatalf("pixels span [%v, %v], want [0, 1]", lo, hi)
	}
	if _, err := LoadFashionMNIST(t.TempDir(), "test"); !errors.Is(err, ErrDatasetMissing) {
		t.Fatalf("empty directory: got %v, want ErrDatasetMissing", err)
	}
}
