//go:build unix

package dataio

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// An input that is a named pipe is recorded without a hash: reading it for
// one would consume what the command reads (before HashInputs the run hung
// on it, with the hash first; then the reader saw half the data).
func TestManifestHashInputsPipe(t *testing.T) {
	dir := t.TempDir()
	fifo, file := filepath.Join(dir, "x.npy"), filepath.Join(dir, "y.txt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	os.WriteFile(file, []byte("abc"), 0o644)
	m := NewManifest("learn", nil)
	m.HashInputs(fifo, file)
	if err := m.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(m.Inputs) != 2 || m.Inputs[0].SHA256 != "" || m.Inputs[0].Note != "a named pipe: not hashed" || m.Inputs[1].SHA256 == "" {
		t.Fatalf("inputs %+v", m.Inputs)
	}
}
