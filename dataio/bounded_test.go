package dataio

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/memtest"
)

// writeZeros writes n zero bytes to w in 1 MiB pieces.
func writeZeros(t *testing.T, w interface{ Write([]byte) (int, error) }, n int) {
	t.Helper()
	zeros := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(zeros))
		if _, err := w.Write(zeros[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// An .npz member declaring shape (1, 1) and then inflating to 256 MiB of
// zeros is refused while allocating almost nothing: the header's size is
// checked against the member's before anything past the header is
// decompressed, so a member is never held whole in memory.
func TestNPZBombRefusedBeforeInflating(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bomb.npz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "X.npy", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(makeNPY(t, 1, "<f8", false, []int{1, 1}, []float64{42}))
	writeZeros(t, w, 256<<20)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := memtest.Allocated(func() { _, err = ReadMatrix(path, "X") })
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "(8 data bytes)") || !strings.Contains(err.Error(), "holds 268435464 data bytes") {
		t.Fatalf("got %v; want a format error naming 8 declared and 268435464 held bytes", err)
	}
	if n > 1<<20 {
		t.Fatalf("refusing a (1, 1) member padded with 256 MiB allocated %s", FormatBytes(float64(n)))
	}
}

// A deflated member whose header declares more than the member holds: the
// matrix grows with the data that arrive, then the truncation is reported.
func TestNPZDeclaredButMissingData(t *testing.T) {
	npy := makeNPY(t, 1, "<f8", false, []int{4, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	// Rewrite the shape to (400000000, 2) (6.4 GB), keeping the header length.
	big := bytes.Replace(npy, []byte("(4, 2)"), []byte("(400000000, 2)"), 1)
	big = bytes.Replace(big, []byte("        \n"), []byte("\n"), 1)
	if len(big) != len(npy) {
		t.Fatalf("test setup: header length changed %d → %d", len(npy), len(big))
	}
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		archive := zipOf(t, method, map[string][]byte{"X.npy": big}, []string{"X.npy"})
		var err error
		n := memtest.Allocated(func() { _, err = decodeNPZBytes(archive, "X") })
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "400000000") {
			t.Fatalf("method %d: got %v, want a format error naming the declared shape", method, err)
		}
		if n > 50<<20 {
			t.Fatalf("method %d: allocated %s for a 6.4 GB declaration backed by 64 bytes", method, FormatBytes(float64(n)))
		}
	}
}

// An IDX .gz whose header declares more than it inflates to (2 GB declared,
// 128 MiB present) is refused without allocating the declared size:
// ReadIDXFile checks the declared size against the gzip trailer first.
func TestIDXGzipBomb(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(makeIDX(0x08, []uint32{2000000000}, nil)) // 2 GB declared (16 GB as float64)
	writeZeros(t, zw, 128<<20)                         // 128 MiB present
	zw.Close()
	path := filepath.Join(t.TempDir(), "bomb-ubyte.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	n := memtest.Allocated(func() { _, err = ReadMatrix(path, "") })
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "2000000000 data bytes") || !strings.Contains(err.Error(), "134217728") {
		t.Fatalf("got %v, want a format error naming the declared and the present size", err)
	}
	if n > 1<<20 {
		t.Fatalf("allocated %s before refusing", FormatBytes(float64(n)))
	}

	// Read as a stream (size unknown), the array grows with the data and
	// the truncation is found at the end: memory follows the real data, 8
	// MiB of it here. (The budget is raised so that the declared 16 GB pass
	// its check whatever this machine's memory.)
	SetMemoryBudget(1 << 40)
	defer SetMemoryBudget(0)
	stream := gz(makeIDX(0x08, []uint32{2000000000}, make([]byte, 8<<20)))
	n = memtest.Allocated(func() { _, err = ReadIDX(bytes.NewReader(stream)) })
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("stream: got %v", err)
	}
	if n > 2*8*(8<<20)+(8<<20) {
		t.Fatalf("stream: allocated %s for 8 MiB of data (64 MiB as float64)", FormatBytes(float64(n)))
	}
}

func TestMemoryBudget(t *testing.T) {
	defer SetMemoryBudget(0)
	if MemoryBudget() <= 0 {
		t.Fatal("default budget not positive")
	}
	dir := t.TempDir()
	x := mat.NewDense(20, 10, nil)
	files := map[string]func(string) error{
		"x.npy": func(p string) error { return WriteNPY(p, x) },
		"x.npz": func(p string) error { return WriteNPZ(p, map[string]*mat.Dense{"X": x}) },
		"x.csv": func(p string) error {
			return os.WriteFile(p, []byte(strings.Repeat(strings.Repeat("0,", 9)+"0\n", 20)), 0o644)
		},
		"x-ubyte": func(p string) error {
			return os.WriteFile(p, makeIDX(0x08, []uint32{20, 10}, make([]byte, 200)), 0o644)
		},
	}
	for name, write := range files {
		p := filepath.Join(dir, name)
		if err := write(p); err != nil {
			t.Fatal(err)
		}
		SetMemoryBudget(1000) // the 20×10 matrix takes 1600 bytes
		_, err := ReadMatrix(p, "X")
		// The CSV reader learns the row count as it goes, so it names the
		// size reached; the others know it from the header.
		if !errors.Is(err, ErrTooLarge) || (name != "x.csv" && !strings.Contains(err.Error(), "1.60 kB")) {
			t.Errorf("%s: got %v, want ErrTooLarge naming 1.60 kB", name, err)
		}
		SetMemoryBudget(1600)
		if _, err := ReadMatrix(p, "X"); err != nil {
			t.Errorf("%s within budget: %v", name, err)
		}
		// A row limit is what the budget is checked against.
		SetMemoryBudget(1000)
		if m, err := ReadMatrixContext(context.Background(), p, ReadOptions{Name: "X", MaxRows: 5}); err != nil || m.RawMatrix().Rows != 5 {
			t.Errorf("%s, 5 rows within budget: %v", name, err)
		}
	}
}

func TestMaxRows(t *testing.T) {
	dir := t.TempDir()
	const r, c = 7, 3
	v := make([]float64, r*c)
	for i := range v {
		v[i] = float64(i) + 0.5
	}
	full := mat.NewDense(r, c, v)
	idxPayload := make([]byte, r*c)
	for i := range idxPayload {
		idxPayload[i] = byte(i)
	}
	var csvText strings.Builder
	csvText.WriteString("a,b,c\n")
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if j > 0 {
				csvText.WriteString(",")
			}
			csvText.WriteString(strconv.FormatFloat(full.At(i, j), 'g', -1, 64))
		}
		csvText.WriteString("\n")
	}
	files := map[string][]byte{
		"c.npy":         makeNPY(t, 1, "<f8", false, []int{r, c}, v),
		"f.npy":         makeNPY(t, 1, "<f8", true, []int{r, c}, v),
		"c.npz":         zipOf(t, zip.Deflate, map[string][]byte{"X.npy": makeNPY(t, 1, "<f8", false, []int{r, c}, v)}, []string{"X.npy"}),
		"x.csv":         []byte(csvText.String()),
		"x-ubyte":       makeIDX(0x08, []uint32{r, c}, idxPayload),
		"x-ubyte.gz":    gz(makeIDX(0x08, []uint32{r, c}, idxPayload)),
		"fortran-2.npy": makeNPY(t, 2, ">f4", true, []int{r, c}, v),
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want, err := ReadMatrix(p, "X")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, k := range []int{1, 3, r, r + 5} {
			got, err := ReadMatrixContext(context.Background(), p, ReadOptions{Name: "X", MaxRows: k})
			if err != nil {
				t.Fatalf("%s MaxRows %d: %v", name, k, err)
			}
			kept := min(k, r)
			if !mat.Equal(got, want.Slice(0, kept, 0, c)) {
				t.Fatalf("%s MaxRows %d: got\n%v\nwant the first %d rows of\n%v", name, k, mat.Formatted(got), kept, mat.Formatted(want))
			}
		}
	}
	if _, err := ReadMatrixContext(context.Background(), filepath.Join(dir, "c.npy"), ReadOptions{MaxRows: -1}); err == nil {
		t.Fatal("MaxRows -1 accepted")
	}
}

func TestReadCancelled(t *testing.T) {
	dir := t.TempDir()
	x := mat.NewDense(300, 100, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, name := range []string{"x.npy", "x.npz", "x.csv"} {
		p := filepath.Join(dir, name)
		var err error
		switch name {
		case "x.npy":
			err = WriteNPY(p, x)
		case "x.npz":
			err = WriteNPZ(p, map[string]*mat.Dense{"X": x})
		default:
			err = os.WriteFile(p, []byte(strings.Repeat("1,2\n", 100000)), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadMatrixContext(ctx, p, ReadOptions{Name: "X"}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: got %v, want context.Canceled", name, err)
		}
	}
}

// A .npy read from a pipe (size unknown) grows with the data and reports a
// truncation like a file does.
func TestNPYUnknownLength(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6}
	b := makeNPY(t, 1, "<f8", false, []int{3, 2}, v)
	m, err := readNPY(bytes.NewReader(b), source{total: -1}, readCfg{})
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, m, 3, 2, v)
	if _, err := readNPY(bytes.NewReader(b[:len(b)-1]), source{total: -1}, readCfg{}); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "after 5 of its 6 elements") {
		t.Fatalf("truncated: got %v", err)
	}
}

func TestParseFormatBytes(t *testing.T) {
	for in, want := range map[string]int64{"512MB": 512e6, "2GiB": 2 << 30, "1.5G": 15e8, "800m": 8e8, "4096": 4096, "16 gb": 16e9, "3Ki": 3072} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1G", "0", "NaN", "1e30T"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
	for n, want := range map[float64]string{812: "812 B", 3.1e6: "3.10 MB", 1.6e9: "1.60 GB", 45.5e3: "45.5 kB", 123e12: "123 TB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%g) = %q, want %q", n, got, want)
		}
	}
}
