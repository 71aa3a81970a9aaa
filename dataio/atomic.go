package dataio

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// AtomicWriteFile writes a file through write so that readers see either the
// old content of path or the complete new content, never a partial file: the
// data goes to a temporary file in the same directory (so the final rename
// stays on one file system), is flushed and fsynced, and is then renamed over
// path. If write or any step fails, the temporary file is removed and an
// existing file at path is left untouched. A new file gets mode 0644; an
// existing file keeps its mode.
func AtomicWriteFile(path string, write func(w io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return fmt.Errorf("dataio: cannot write to %q: it names a directory, expected a file path", path)
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("dataio: cannot write to %q: it is a directory, expected a file path", path)
		}
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("dataio: cannot create a temporary file next to %s: %w", path, err)
	}
	tmpName := tmp.Name()
	done := false
	defer func() {
		// Also runs when write panics, so no temporary file is left behind.
		if !done {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err := write(bw); err != nil {
		return fmt.Errorf("dataio: writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dataio: writing %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("dataio: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("dataio: syncing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("dataio: closing %s: %w", path, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("dataio: renaming into %s: %w", path, err)
	}
	done = true
	// Persist the rename itself; not every platform lets a directory be
	// synced, and the data is already safe, so failure here is ignored.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
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
