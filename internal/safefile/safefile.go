// Package safefile writes output files so that nothing the user had is lost
// or damaged: a failure, a panic or an interrupt at any moment leaves every
// target path either exactly as it was or holding the complete new content.
//
// Every file is first written to a temporary file in the target's directory
// (so the final rename stays on one file system), then a transaction renames
// all of a command's files into place together, restoring the previous files
// if any rename fails. Concurrent transactions into one directory, in this
// process or another, take turns for their renames (a lock file there), so
// files that belong together (an output and its manifest) always come from
// the same transaction. Temporary files are registered so that an interrupt
// handler can remove them (RemoveAllAndHold) without racing a commit in
// progress, and hold a lock while they exist, so that the sweep of stale
// temporary files (left by a killed process) never takes a live one.
//
// Only regular files are written. A target that is a device (/dev/null), a
// directory, a FIFO or a socket is refused; a symbolic link is followed and
// the file it names is replaced, the link itself is kept. New files get the
// permissions 0666 minus the process umask, as any Unix tool's output;
// replaced files keep their mode.
package safefile

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/relurec/relurec/errs"
)

// tempPrefix starts the name of every temporary and backup file, so that a
// stale one (left by a process killed with SIGKILL) is recognisable; it is
// followed by the writer's process id.
const tempPrefix = ".relurec-tmp-"

var (
	// commitMu orders commits with RemoveAllAndHold: commits hold it for
	// reading while they rename (they may run at once; the directory
	// locks order them), RemoveAllAndHold for writing, so an interrupt
	// either happens before a commit's first rename or after its last.
	commitMu sync.RWMutex
	// liveMu guards live.
	liveMu sync.Mutex
	// live holds the temporary files that exist right now, by name.
	live = map[string]tempFile{}
)

// tempFile is a registered temporary file.
type tempFile struct {
	// target is the path the content is for, named in messages.
	target string
	// guard is open on the file and holds a shared lock on it, which tells
	// the stale-file sweep of other processes that the file is in use.
	guard *os.File
}

// Target resolves the path an output will be written to: path itself when
// it does not exist yet or is a regular file, the file a symbolic link names
// when path is a link. It refuses (with an error wrapping errs.ErrInput) a
// path that names a directory, a device, a FIFO or a socket, a dangling link,
// and a missing parent directory.
func Target(path string) (string, error) {
	if path == "" || strings.HasSuffix(path, string(filepath.Separator)) {
		return "", errs.Inputf("%q names a directory; expected a file path", path)
	}
	resolved := path
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		r, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", errs.Inputf("%s is a symbolic link to a missing file (%v); give a regular file path", path, err)
		}
		resolved = r
	}
	fi, err := os.Stat(resolved)
	switch {
	case err == nil && fi.IsDir():
		return "", errs.Inputf("%s is a directory; expected a file path", path)
	case err == nil && !fi.Mode().IsRegular():
		return "", errs.Inputf("%s is not a regular file (%s); relurec writes outputs only to regular files, so that a failed run cannot damage a device or special file", path, Kind(fi.Mode()))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: cannot write %s: %v", errs.ErrInput, path, err)
	}
	dir := filepath.Dir(resolved)
	st, err := os.Stat(dir)
	if err != nil {
		return "", errs.Inputf("cannot write %s: directory %s does not exist", path, dir)
	}
	if !st.IsDir() {
		return "", errs.Inputf("cannot write %s: %s is not a directory", path, dir)
	}
	return resolved, nil
}

// Kind names a non-regular file mode for messages.
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

// CheckWritable fails, before any long computation, when path could not be
// written at the end: Target's checks, a directory or file that the file
// system forbids to change (chattr +a or +i), then a probe file created,
// renamed and removed in the target's directory (which also catches a
// read-only directory and a name too long for the file system).
func CheckWritable(path string) error {
	target, err := Target(path)
	if err != nil {
		return err
	}
	for _, p := range []string{filepath.Dir(target), target} {
		if attr := fixedAttribute(p); attr != "" {
			return errs.Inputf("cannot write %s: %s is %s; relurec writes each output to a temporary file and renames it into place, which that forbids: write elsewhere or remove the attribute", path, p, attr)
		}
	}
	probe, err := createTemp(target)
	if err != nil {
		return err
	}
	moved, err := tempName(target, "")
	if err == nil {
		err = rename(probe, moved)
	}
	if err != nil {
		forget(probe)
		return fmt.Errorf("%w: cannot write %s: files cannot be renamed in %s (%v); relurec writes each output to a temporary file and renames it into place", errs.ErrInput, path, filepath.Dir(target), unwrapPath(err))
	}
	liveMu.Lock()
	live[moved] = live[probe]
	delete(live, probe)
	liveMu.Unlock()
	forget(moved)
	return nil
}

// createTemp creates an empty temporary file next to target, named so that
// it keeps target's extension and can be recognised as relurec's, with mode
// 0666 minus the umask, and registers it. It first sweeps the stale
// temporary files of dead processes from the directory.
func createTemp(target string) (string, error) {
	removeStale(filepath.Dir(target))
	name, err := tempName(target, "")
	if err != nil {
		return "", err
	}
	liveMu.Lock()
	defer liveMu.Unlock()
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return "", writeError(target, err)
	}
	guard(f)
	live[name] = tempFile{target: target, guard: f}
	return name, nil
}

// register records an existing file (a backup) as a temporary file of this
// process. Called with liveMu held.
func register(name, target string) {
	f, err := os.Open(name)
	if err == nil {
		guard(f)
	}
	live[name] = tempFile{target: target, guard: f}
}

// tempName returns a fresh name next to target: the prefix, this process's
// id, a random part, tag and target's base name (so the extension is kept).
func tempName(target, tag string) (string, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	dir, base := filepath.Split(target)
	return filepath.Join(dir, tempPrefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:])+"-"+tag+tailOf(base)), nil
}

// tailOf shortens a long base name to its last 160 bytes (keeping the
// extension), so that the temporary name stays within the usual 255-byte
// limit whenever the target's own name does.
func tailOf(base string) string {
	const keep = 160
	if len(base) <= keep {
		return base
	}
	return base[len(base)-keep:]
}

// writeError explains why a file next to target could not be created.
// Permission problems and over-long names are the user's to fix (exit 2).
func writeError(target string, err error) error {
	err = unwrapPath(err)
	msg := fmt.Sprintf("cannot write %s: %v", target, err)
	if errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "name too long") ||
		strings.Contains(err.Error(), "read-only file system") {
		return fmt.Errorf("%w: %s", errs.ErrInput, msg)
	}
	return errors.New(msg)
}

// unwrapPath returns the cause of err when err is a *fs.PathError or an
// *os.LinkError, whose message names a temporary file rather than the
// user's path; any other error as it is.
func unwrapPath(err error) error {
	switch e := err.(type) {
	case *fs.PathError:
		return e.Err
	case *os.LinkError:
		return e.Err
	}
	return err
}

// forget removes a registered temporary file and unregisters it; a name
// that is not registered (any more) is left alone.
func forget(name string) {
	liveMu.Lock()
	defer liveMu.Unlock()
	if _, ok := live[name]; ok {
		os.Remove(name)
		unregisterLocked(name)
	}
}

// release unregisters a temporary file that has been renamed into place.
func release(name string) {
	liveMu.Lock()
	defer liveMu.Unlock()
	unregisterLocked(name)
}

// unregisterLocked drops name from the registry and closes its guard.
// Called with liveMu held.
func unregisterLocked(name string) {
	if tf, ok := live[name]; ok && tf.guard != nil {
		tf.guard.Close()
	}
	delete(live, name)
}

// liveTarget returns the path the registered temporary file name is for.
func liveTarget(name string) (string, bool) {
	liveMu.Lock()
	defer liveMu.Unlock()
	tf, ok := live[filepath.Clean(name)]
	return tf.target, ok
}

// RemoveAllAndHold removes every temporary file of this process and then
// keeps the commit and registry locks, so that no output is renamed into
// place and no temporary file is created afterwards. It waits for the
// commits in progress to finish first. Call it only right before the
// process exits (the interrupt handler does).
func RemoveAllAndHold() {
	commitMu.Lock()
	liveMu.Lock()
	for name := range live {
		os.Remove(name)
		unregisterLocked(name)
	}
}

// Live returns how many temporary files exist, for tests.
func Live() int {
	liveMu.Lock()
	defer liveMu.Unlock()
	return len(live)
}

// WriteFile writes one file through write as a transaction of one: readers
// see either the old content of path or the complete new content, never a
// partial file. The content is flushed and fsynced before the rename.
//
// A path that is one of this process's temporary files (a transaction's
// output, handed to a writer that writes atomically itself) is written
// straight into: the transaction already makes the write atomic.
func WriteFile(path string, write func(w io.Writer) error) error {
	if target, ok := liveTarget(path); ok {
		if err := writeTo(path, write); err != nil {
			return fmt.Errorf("writing %s: %w", target, unwrapPath(err))
		}
		return nil
	}
	var tx Tx
	defer tx.Abort() // also when write panics: no temporary file is left
	tmp, err := tx.Create(path)
	if err != nil {
		return err
	}
	if err := writeTo(tmp, write); err != nil {
		return fmt.Errorf("writing %s: %w", path, unwrapPath(err))
	}
	return tx.Commit(context.Background())
}

// writeTo fills the existing temporary file name through write, buffered.
func writeTo(name string, write func(w io.Writer) error) (err error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// syncDir persists renames in dir; not every platform lets a directory be
// synced, and the data is already safe, so failure is ignored.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = fsync(d)
		d.Close()
	}
}
