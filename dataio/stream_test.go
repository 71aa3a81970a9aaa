package dataio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
)

// Arrays written back to back are read back one at a time, each read
// stopping at its array's end; a truncated one is an error.
func TestNPYStream(t *testing.T) {
	a := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	b := mat.NewDense(1, 1, []float64{-0.5})
	var buf bytes.Buffer
	for _, m := range []*mat.Dense{a, b} {
		if err := WriteNPYTo(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	whole := buf.Bytes()
	r := bufio.NewReader(bytes.NewReader(whole))
	for i, want := range []*mat.Dense{a, b} {
		got, err := ReadNPYFrom(context.Background(), r)
		if err != nil {
			t.Fatalf("array %d: %v", i, err)
		}
		if !mat.Equal(got, want) {
			t.Fatalf("array %d: %v, want %v", i, mat.Formatted(got), mat.Formatted(want))
		}
	}
	if _, err := ReadNPYFrom(context.Background(), r); err == nil {
		t.Fatal("read past the last array")
	}
	short := bufio.NewReader(bytes.NewReader(whole[:len(whole)-20]))
	if _, err := ReadNPYFrom(context.Background(), short); err != nil {
		t.Fatal(err) // the first array is whole
	}
	if _, err := ReadNPYFrom(context.Background(), short); err == nil || !errors.Is(err, errs.ErrInput) {
		t.Fatalf("truncated array: %v", err)
	}
	if err := WriteNPYTo(&buf, nil); err == nil {
		t.Fatal("wrote a nil matrix")
	}
}

// A reply whose header declares a shape other than the one expected is
// refused after its header: a stream announcing 2^27 rows (1 GiB) and
// holding none of them is not waited for, and a declared shape beyond the
// memory budget is refused the same way.
func TestNPYStreamShapeCheckedBeforeData(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNPYTo(&buf, mat.NewDense(3, 2, []float64{1, 2, 3, 4, 5, 6})); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for _, c := range []struct{ rows, cols int }{{3, 2}, {3, 0}, {0, 2}, {0, 0}} {
		if _, err := ReadNPYFromShape(context.Background(), bufio.NewReader(bytes.NewReader(whole)), c.rows, c.cols); err != nil {
			t.Fatalf("want %d×%d: %v", c.rows, c.cols, err)
		}
	}
	for _, c := range []struct{ rows, cols int }{{4, 2}, {3, 1}, {2, 0}} {
		_, err := ReadNPYFromShape(context.Background(), bufio.NewReader(bytes.NewReader(whole)), c.rows, c.cols)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "expected") {
			t.Fatalf("want %d×%d from a 3×2 array: %v", c.rows, c.cols, err)
		}
	}
	// A header announcing 1 GiB followed by 8 MiB of its data: refused
	// after the header and one buffer's read.
	var huge bytes.Buffer
	if err := WriteNPYTo(&huge, mat.NewDense(1, 1, nil)); err != nil {
		t.Fatal(err)
	}
	// The shape grows by 8 characters into the header's padding, so the
	// header keeps its length.
	hdr := bytes.Replace(huge.Bytes()[:huge.Len()-8], []byte("(1, 1), }        "), []byte("(134217728, 1), }"), 1)
	r := &countingReader{r: io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, 8<<20)))}
	br := bufio.NewReader(r)
	_, err := ReadNPYFromShape(context.Background(), br, 5, 0)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "134217728") || r.n > int64(len(hdr)+br.Size()) {
		t.Fatalf("1 GiB header: %v after reading %d bytes", err, r.n)
	}
	defer SetMemoryBudget(MemoryBudget())
	SetMemoryBudget(1 << 20)
	wide := bytes.Replace(hdr, []byte("(134217728, 1)"), []byte("(5, 134217728)"), 1)
	if bytes.Equal(wide, hdr) || len(hdr) != huge.Len()-8 {
		t.Fatal("the test's headers were not built")
	}
	if _, err := ReadNPYFromShape(context.Background(), bufio.NewReader(bytes.NewReader(wide)), 5, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("5 × 2^27 under a 1 MiB budget: %v", err)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
