package dataio

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// NPYRows reads a file block by block, and again after Rewind, into the
// values ReadMatrix gives; a Fortran-order or truncated file is refused
// with ErrFormat.
func TestNPYRowsBlocks(t *testing.T) {
	dir := t.TempDir()
	want := mat.NewDense(23, 3, nil)
	for i := range 23 {
		for j := range 3 {
			want.Set(i, j, float64(10*i+j)+0.25)
		}
	}
	path := filepath.Join(dir, "a.npy")
	if err := WriteNPY(path, want); err != nil {
		t.Fatal(err)
	}
	r, err := OpenNPYRows(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, c := r.Dims(); n != 23 || c != 3 {
		t.Fatalf("Dims = %d, %d; want 23, 3", n, c)
	}
	ctx := context.Background()
	for pass := range 2 {
		got := mat.NewDense(23, 3, nil)
		block := mat.NewDense(5, 3, nil)
		at := 0
		for {
			n, err := r.ReadRows(ctx, block)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				got.SetRow(at+i, block.RawRowView(i))
			}
			at += n
		}
		if at != 23 || !mat.Equal(got, want) {
			t.Fatalf("pass %d: read %d rows, equal %v", pass, at, mat.Equal(got, want))
		}
		if err := r.Rewind(); err != nil {
			t.Fatal(err)
		}
	}

	// The same header with Fortran order, and the file cut short.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fortran := filepath.Join(dir, "f.npy")
	fb := strings.Replace(string(b), "'fortran_order': False", "'fortran_order': True ", 1)
	if err := os.WriteFile(fortran, []byte(fb), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNPYRows(fortran); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "Fortran order") {
		t.Fatalf("Fortran order: err = %v; want ErrFormat", err)
	}
	cut := filepath.Join(dir, "cut.npy")
	if err := os.WriteFile(cut, b[:len(b)-8*3*2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNPYRows(cut); !errors.Is(err, ErrFormat) {
		t.Fatalf("truncated: err = %v; want ErrFormat", err)
	}
	if IsNPYFile(dir) || !IsNPYFile(path) {
		t.Fatal("IsNPYFile: a directory or a .npy file misjudged")
	}
}
