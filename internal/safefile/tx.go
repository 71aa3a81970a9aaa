package safefile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/relurec/relurec/errs"
)

// Tx is a set of output files committed together: Create gives a temporary
// path per output, the caller writes each one completely, and Commit renames
// them all into place, or Abort removes them. Until Commit succeeds every
// target keeps its previous content. The zero value is ready to use; a Tx
// is not safe for concurrent use, but any number of them may commit at once,
// in one process or several.
type Tx struct {
	files []pending
	done  bool
}

// pending is one output of a transaction.
type pending struct {
	path   string // the path as the caller gave it, for messages
	target string // the resolved path the file ends up at
	tmp    string // where it is being written
}

// rename is os.Rename and fsync is (*os.File).Sync; tests replace them to
// make a commit fail or to skip the disk flushes.
var (
	rename = os.Rename
	fsync  = (*os.File).Sync
)

// lockName is the file in each output directory whose lock a commit holds
// while it renames (see lockCommit).
const lockName = ".relurec-lock"

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
	tmp, err := createTemp(target)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(target); err == nil {
		if err := os.Chmod(tmp, st.Mode().Perm()); err != nil {
			forget(tmp)
			return "", fmt.Errorf("cannot write %s: %w", path, unwrapPath(err))
		}
	}
	t.files = append(t.files, pending{path: path, target: target, tmp: tmp})
	return tmp, nil
}

// NameTargets returns err with the name of each of t's temporary files
// replaced by the path the caller gave for it, so that the message of a
// writer that was handed a temporary path names the user's file; errors.Is
// and errors.As see err as it is.
func (t *Tx) NameTargets(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, p := range t.files {
		msg = strings.ReplaceAll(msg, p.tmp, p.path)
	}
	if msg == err.Error() {
		return err
	}
	return errs.New(msg, err) // msg, matching what err matches
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
//
// A commit of several files holds the commit lock of their directories
// (lockCommit) from its first rename to its last, so two commits of the
// same outputs, in this process or another, never interleave: the files a
// reader finds together come from one transaction.
func (t *Tx) Commit(ctx context.Context) error {
	if t.done {
		return errors.New("safefile: Commit after Commit or Abort")
	}
	for _, p := range t.files {
		if err := syncFile(p.tmp); err != nil {
			t.Abort()
			return fmt.Errorf("writing %s: %w", p.path, unwrapPath(err))
		}
	}
	commitMu.RLock()
	defer commitMu.RUnlock()
	if err := ctx.Err(); err != nil {
		t.Abort()
		return err
	}
	dirs := t.dirs()
	unlock := func() {}
	if len(t.files) > 1 {
		unlock = lockCommit(dirs)
	}
	err := t.renameAll()
	unlock()
	if err != nil {
		return err
	}
	for _, d := range dirs {
		syncDir(d)
	}
	return nil
}

// dirs lists the directories of t's targets, sorted, each once.
func (t *Tx) dirs() []string {
	var dirs []string
	for _, p := range t.files {
		dirs = append(dirs, filepath.Dir(p.target))
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// renameAll backs up the targets, renames every temporary file into place
// and removes the backups, or, when a rename fails, restores the targets.
func (t *Tx) renameAll() error {
	backups := make([]string, len(t.files))
	for i, p := range t.files {
		backups[i] = backup(p.target)
	}
	for i, p := range t.files {
		if err := rename(p.tmp, p.target); err != nil {
			t.rollback(i, backups)
			return fmt.Errorf("renaming into %s: %w", p.path, unwrapPath(err))
		}
		release(p.tmp)
	}
	t.done = true
	for _, b := range backups {
		if b != "" {
			forget(b)
		}
	}
	return nil
}

// lockCommit takes the commit lock of each directory in dirs, in order (so
// that two commits never wait for each other in a cycle), and returns the
// function that releases them: an exclusive lock on the file lockName
// there, which is created on first use and never removed (a lock file
// removed and created again could be locked by two processes at once, one
// under each). Where a lock cannot be taken (a lock file another user owns
// on a file system that locks only files open for writing, a file system
// without locks) the commit goes ahead without it.
func lockCommit(dirs []string) (unlock func()) {
	var held []*os.File
	for _, d := range dirs {
		name := filepath.Join(d, lockName)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			f, err = os.Open(name)
		}
		if err != nil {
			continue
		}
		if lockExclusive(f) != nil {
			f.Close()
			continue
		}
		held = append(held, f)
	}
	return func() {
		for _, f := range held {
			f.Close() // releases the lock
		}
	}
}

// backup hard-links target's current content to a registered temporary
// name, or returns "" when target does not exist or cannot be linked.
func backup(target string) string {
	if _, err := os.Lstat(target); err != nil {
		return ""
	}
	name, err := tempName(target, "old-")
	if err != nil {
		return ""
	}
	liveMu.Lock()
	defer liveMu.Unlock()
	if err := os.Link(target, name); err != nil {
		return ""
	}
	register(name, target)
	return name
}

// rollback undoes the first n renames of a failed commit and removes every
// temporary and backup file.
func (t *Tx) rollback(n int, backups []string) {
	for i := 0; i < n; i++ {
		if backups[i] != "" {
			os.Rename(backups[i], t.files[i].target)
		} else {
			os.Remove(t.files[i].target)
		}
	}
	for _, b := range backups {
		if b != "" {
			forget(b)
		}
	}
	t.Abort()
}

// syncFile flushes a written temporary file to stable storage.
func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := fsync(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
