package dataio

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/relurec/relurec/internal/safefile"
)

// AtomicWriteFile writes a file through write so that readers see either the
// old content of path or the complete new content, never a partial file: the
// data goes to a temporary file in the same directory, is flushed and
// fsynced, and is then renamed over path. If write or any step fails, the
// temporary file is removed and an existing file at path is left untouched.
// Only regular files are written: a device such as /dev/null, a directory or
// a FIFO is refused with an error wrapping errs.ErrInput; a symbolic link is
// followed (the file it names is replaced, the link kept). A new file gets
// mode 0666 minus the umask; an existing file keeps its mode. See package
// internal/safefile, which also writes several files as one transaction.
func AtomicWriteFile(path string, write func(w io.Writer) error) error {
	if err := safefile.WriteFile(path, write); err != nil {
		return fmt.Errorf("dataio: %w", err)
	}
	return nil
}

// CheckOutputNotInput returns an error wrapping ErrOutputIsInput when out
// refers to the same file as any of inputs: by os.SameFile when both exist
// (which sees through symbolic and hard links), by cleaned absolute path
// otherwise. Empty input paths are ignored.
func CheckOutputNotInput(out string, inputs ...string) error {
	outInfo, outErr := os.Stat(out)
	outAbs, err := filepath.Abs(out)
	if err != nil {
		outAbs = filepath.Clean(out)
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		same := false
		inInfo, inErr := os.Stat(in)
		if outErr == nil && inErr == nil {
			same = os.SameFile(outInfo, inInfo)
		} else {
			inAbs, err := filepath.Abs(in)
			if err != nil {
				inAbs = filepath.Clean(in)
			}
			same = inAbs == outAbs
		}
		if same {
			return fmt.Errorf("output %s is the same file as input %s: %w", out, in, ErrOutputIsInput)
		}
	}
	return nil
}
