package dataio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
