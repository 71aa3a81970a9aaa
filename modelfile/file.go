package modelfile

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/relurec/relurec/internal/safefile"
)

// readFile opens path and hands it, buffered, to read; errors name the
// file.
func readFile(path string, read func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("modelfile: %w", err)
	}
	defer f.Close()
	if err := read(bufio.NewReaderSize(f, 1<<16)); err != nil {
		return fmt.Errorf("modelfile: %s: %w", path, err)
	}
	return nil
}

// saveFile writes path through write atomically (internal/safefile): path
// is either left as it was or holds the whole file. what names the file
// in errors ("model", "ONNX model").
func saveFile(path, what string, write func(w io.Writer) error) error {
	if err := safefile.WriteFile(path, write); err != nil {
		return fmt.Errorf("modelfile: saving %s to %s: %w", what, path, err)
	}
	return nil
}
