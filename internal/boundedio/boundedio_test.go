package boundedio

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadN(t *testing.T) {
	b, err := ReadN(strings.NewReader("abcdef"), 4)
	if err != nil || string(b) != "abcd" {
		t.Fatalf("got %q, %v", b, err)
	}
	b, err = ReadN(strings.NewReader("ab"), 1<<40) // a lying count allocates nothing up front
	if err != nil || string(b) != "ab" {
		t.Fatalf("got %q, %v", b, err)
	}
	boom := errors.New("boom")
	if _, err := ReadN(iotest.ErrReader(boom), 4); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the read error", err)
	}
}

func TestReadAll(t *testing.T) {
	b, over, err := ReadAll(bytes.NewReader([]byte("abc")), 3)
	if err != nil || over || string(b) != "abc" {
		t.Fatalf("got %q %v %v", b, over, err)
	}
	if b, over, err := ReadAll(bytes.NewReader([]byte("abcd")), 3); err != nil || !over || b != nil {
		t.Fatalf("got %q %v %v", b, over, err)
	}
}

func TestIsEOF(t *testing.T) {
	if !IsEOF(io.EOF) || !IsEOF(io.ErrUnexpectedEOF) || IsEOF(errors.New("x")) || IsEOF(nil) {
		t.Fatal("IsEOF")
	}
}
