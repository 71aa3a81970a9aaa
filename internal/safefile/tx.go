package safefile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/relurec/relurec/errs"
)

// Tx is a set of output files committed together: Create gives a temporary
// path per output, the caller writes each one completely, and Commit renames
// them all into place, or Abort removes them. Until Commit succeeds every
// target keeps its previous content. The zero value is ready to use; a Tx
// is not safe for concurrent use.
type Tx struct {
	files []pending
	done  bool
}

// pending is one output of a transaction.
type pending struct {
	target string // the resolved path the file ends up at
	tmp    string // where it is being written
}

// Create checks path with Target, creates an empty temporary file next to
// it (mode 0666 minus the umask, or the mode of the file it replaces) and
// returns the temporary file's path for the caller to write. The path keeps
// path's extension, so writers that choose a format by extension work.
func (t *Tx) Create(path string) (string, error) {
	if t.done {
		return "", errors.New("safefile: Create after Commit or Abort")
	}
	target, err := Target(path)
	if err != nil {
		return "", err
	}
	for _, p := range t.files {
		if p.target == target {
			return "", fmt.Errorf("%w: %s is given twice as an output", errs.ErrInput, path)
		}
	}
	f, err := createTemp(target)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(target); err == nil {
		err = f.Chmod(st.Mode().Perm())
		if err != nil {
			f.Close()
			forget(f.Name())
			return "", err
		}
	}
	f.Close()
	t.files = append(t.files, pending{target: target, tmp: f.Name()})
	return f.Name(), nil
}

// Abort removes every temporary file of the transaction; the targets are
// untouched. It is safe to call after Commit (it then does nothing), so
// `defer tx.Abort()` is the usual pattern.
func (t *Tx) Abort() {
	if t.done {
		return
	}
	t.done = true
	for _, p := range t.files {
		forget(p.tmp)
	}
}

// Commit fsyncs every temporary file and renames them all into place. When
// ctx is already cancelled (the user pressed Ctrl-C) nothing is renamed and
// ctx.Err() is returned. If a rename fails, the targets already replaced get
// their previous content back (from a hard-link backup made just before) and
// the new files are removed, so either every target is new or every target is
// as it was. (On a file system without hard links a replaced file cannot be
// restored; that needs a rename to fail between two renames in one
// directory, which does not happen short of the disk failing.)
func (t *Tx) Commit(ctx context.Context) error {
	if t.done {
		return errors.New("safefile: Commit after Commit or Abort")
	}
	for _, p := range t.files {
		if err := syncFile(p.tmp); err != nil {
			t.Abort()
			return fmt.Errorf("writing %s: %w", p.target, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if err := ctx.Err(); err != nil {
		t.abortLocked()
		return err
	}
	backups := make([]string, len(t.files))
	for i, p := range t.files {
		backups[i] = backup(p.target)
	}
	for i, p := range t.files {
		if err := os.Rename(p.tmp, p.target); err != nil {
			t.rollbackLocked(i, backups)
			return fmt.Errorf("renaming into %s: %w", p.target, err)
		}
		delete(live, p.tmp)
	}
	t.done = true
	dirs := map[string]bool{}
	for i, p := range t.files {
		if backups[i] != "" {
			os.Remove(backups[i])
			delete(live, backups[i])
		}
		dirs[filepath.Dir(p.target)] = true
	}
	for d := range dirs {
		syncDir(d)
	}
	return nil
}

// backup hard-links target's current content to a registered temporary
// name, or returns "" when target does not exist or cannot be linked.
// Called with mu held.
func backup(target string) string {
	if _, err := os.Lstat(target); err != nil {
		return ""
	}
	name, err := tempName(target, "old-")
	if err != nil {
		return ""
	}
	if err := os.Link(target, name); err != nil {
		return ""
	}
	live[name] = struct{}{}
	return name
}

// rollbackLocked undoes the first n renames of a failed commit and removes
// every temporary and backup file. Called with mu held.
func (t *Tx) rollbackLocked(n int, backups []string) {
	for i := 0; i < n; i++ {
		if backups[i] != "" {
			os.Rename(backups[i], t.files[i].target)
		} else {
			os.Remove(t.files[i].target)
		}
	}
	for _, b := range backups {
		if b != "" {
			os.Remove(b)
			delete(live, b)
		}
	}
	t.abortLocked()
}

// abortLocked removes the temporary files with mu held.
func (t *Tx) abortLocked() {
	t.done = true
	for _, p := range t.files {
		os.Remove(p.tmp)
		delete(live, p.tmp)
	}
}

// syncFile flushes a written temporary file to stable storage.
func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
