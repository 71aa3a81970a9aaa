package safefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/relurec/relurec/errs"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// leftovers lists relurec's temporary files in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	return m
}

// A device or a directory is refused as a target: renaming over it would,
// for `--out /dev/null` run as root, replace the device with a regular file.
func TestTargetRefusesDevicesAndDirectories(t *testing.T) {
	for _, p := range []string{os.DevNull, t.TempDir(), t.TempDir() + "/"} {
		_, err := Target(p)
		if !errors.Is(err, errs.ErrInput) {
			t.Errorf("Target(%q) = %v, want an ErrInput refusal", p, err)
		}
	}
	if err := WriteFile(os.DevNull, writeString("x")); !errors.Is(err, errs.ErrInput) {
		t.Fatalf("WriteFile(/dev/null) = %v, want refusal", err)
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a character device: %v %v", st.Mode(), err)
	}
	if _, err := Target(filepath.Join(t.TempDir(), "missing", "out.npy")); !errors.Is(err, errs.ErrInput) {
		t.Errorf("missing directory: %v", err)
	}
}

// A symbolic link given as an output is followed: its target is written and
// the link kept, not replaced by a plain file.
func TestSymlinkTargetIsWrittenAndLinkKept(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.txt")
	link := filepath.Join(dir, "link.txt")
	if err := os.WriteFile(real, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.txt", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, writeString("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v", err)
	}
	if got := read(t, real); got != "new" {
		t.Fatalf("link target holds %q, want new", got)
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Fatalf("replaced file's mode %v, want 0600 kept", fi.Mode().Perm())
	}
	dangling := filepath.Join(dir, "dangling")
	os.Symlink("nowhere", dangling)
	if err := WriteFile(dangling, writeString("x")); !errors.Is(err, errs.ErrInput) {
		t.Fatalf("dangling link: %v", err)
	}
}

// New outputs get 0666 minus the umask, as any file a program creates.
func TestNewFilesFollowUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "out.bin")
	if err := WriteFile(p, writeString("x")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v under umask 077, want 0600", fi.Mode().Perm())
	}
}

// When a later rename of a commit fails (here the manifest's), the model
// renamed into place before it gets its previous content back from its
// hard-link backup: a failed run does not lose the user's previous model.
func TestFailedCommitRestoresEveryTarget(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.safetensors")
	manifest := model + ".manifest.json"
	os.WriteFile(model, []byte("old model"), 0o644)
	os.WriteFile(manifest, []byte("old manifest"), 0o644)
	var tx Tx
	defer tx.Abort()
	a, err := tx.Create(model)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tx.Create(manifest)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(a, []byte("new model"), 0o644)
	os.WriteFile(b, []byte("new manifest"), 0o644)
	// The second rename fails: its target became a non-empty directory.
	os.Remove(manifest)
	os.MkdirAll(filepath.Join(manifest, "x"), 0o755)
	if err := tx.Commit(context.Background()); err == nil {
		t.Fatal("commit over a directory succeeded")
	}
	if got := read(t, model); got != "old model" {
		t.Fatalf("model holds %q after a failed commit, want the old content", got)
	}
	if l := leftovers(t, dir); len(l) != 0 || Live() != 0 {
		t.Fatalf("temporary files left: %v (live %d)", l, Live())
	}
}

func TestCommitWritesAllOrCancelledWritesNothing(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	os.WriteFile(p1, []byte("old"), 0o644)
	for _, cancelled := range []bool{true, false} {
		var tx Tx
		t1, _ := tx.Create(p1)
		t2, err := tx.Create(p2)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(t1, ".npy") {
			t.Fatalf("temporary name %s lost the extension", t1)
		}
		os.WriteFile(t1, []byte("new1"), 0o644)
		os.WriteFile(t2, []byte("new2"), 0o644)
		ctx, cancel := context.WithCancel(context.Background())
		if cancelled {
			cancel()
		}
		err = tx.Commit(ctx)
		cancel()
		if cancelled {
			if !errors.Is(err, context.Canceled) || read(t, p1) != "old" {
				t.Fatalf("cancelled commit: err %v, a.npy %q", err, read(t, p1))
			}
			if _, err := os.Stat(p2); err == nil {
				t.Fatal("cancelled commit created b.npy")
			}
		} else if err != nil || read(t, p1) != "new1" || read(t, p2) != "new2" {
			t.Fatalf("commit: %v", err)
		}
		if l := leftovers(t, dir); len(l) != 0 {
			t.Fatalf("temporary files left: %v", l)
		}
	}
}

func TestFailedWriteLeavesOldFileAndNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.npz")
	os.WriteFile(p, []byte("old"), 0o644)
	boom := errors.New("disk full")
	if err := WriteFile(p, func(w io.Writer) error { io.WriteString(w, "partial"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if read(t, p) != "old" || len(leftovers(t, dir)) != 0 {
		t.Fatal("a failed write damaged the old file or left a temporary file")
	}
}

// A temporary file left by a dead process (a run killed with SIGKILL) is
// removed by the next write to that directory; a live process's is kept.
func TestStaleTemporaryFilesOfDeadProcessesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "X.npy")
	stale := filepath.Join(dir, tempPrefix+"2147483646-abcdef-X.npy")
	mine := filepath.Join(dir, tempPrefix+"1-abcdef-X.npy") // pid 1 is alive
	os.WriteFile(stale, []byte("junk"), 0o644)
	os.WriteFile(mine, []byte("junk"), 0o644)
	if err := WriteFile(target, writeString("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("stale temporary file of a dead process was kept")
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatal("temporary file of a live process was removed")
	}
}

func TestCheckWritableCatchesLongNamesBeforeWork(t *testing.T) {
	p := filepath.Join(t.TempDir(), strings.Repeat("n", 250)+".safetensors")
	if err := CheckWritable(p); !errors.Is(err, errs.ErrInput) {
		t.Fatalf("CheckWritable(long name) = %v, want ErrInput", err)
	}
	if err := CheckWritable(filepath.Join(t.TempDir(), "ok.npy")); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveAllAndHoldRemovesTemporaries(t *testing.T) {
	var tx Tx
	tmp, err := tx.Create(filepath.Join(t.TempDir(), "big.npy"))
	if err != nil {
		t.Fatal(err)
	}
	RemoveAllAndHold()
	defer func() { liveMu.Unlock(); commitMu.Unlock() }()
	if _, err := os.Stat(tmp); err == nil || len(live) != 0 {
		t.Fatal("temporary file survived RemoveAllAndHold")
	}
}

// A killed process's temporary file for another output in the same
// directory is removed by the next write there, not only by the next write
// of its own name; one that a process holds a lock on (a live writer this
// process cannot see: another PID namespace or host) is kept.
func TestStaleTemporaryFilesOfAnyNameAreRemoved(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, tempPrefix+"2147483646-abcdef-huge.npy")
	os.WriteFile(stale, []byte("junk"), 0o644)
	locked := filepath.Join(dir, tempPrefix+"2147483645-abcdef-other.npz")
	os.WriteFile(locked, []byte("in use"), 0o644)
	f, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	guard(f)
	if err := CheckWritable(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("a dead process's temporary file for another output was kept")
	}
	if _, err := os.Stat(locked); err != nil {
		t.Fatal("a locked temporary file was removed")
	}
}

// memDir returns a temporary directory in memory (under /dev/shm) where
// there is one, so that thousands of commits do not wait on a disk's
// journal; else t.TempDir().
func memDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "safefile-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writePair commits model and manifest holding the same content, tag, as
// one transaction.
func writePair(path, tag string) error {
	var tx Tx
	defer tx.Abort()
	for _, p := range []string{path, path + ".manifest.json"} {
		tmp, err := tx.Create(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(tmp, []byte(tag), 0o644); err != nil {
			return err
		}
	}
	return tx.Commit(context.Background())
}

// Two transactions committing the same model and manifest at once leave a
// matching pair: each holds the directory's commit lock from its first
// rename to its last, also within one process (commits do not exclude each
// other here otherwise). 1000 pairs, as two learn runs writing one --out.
func TestConcurrentCommitsKeepPairsTogether(t *testing.T) {
	defer func(f func(*os.File) error) { fsync = f }(fsync)
	fsync = func(*os.File) error { return nil } // the disk flushes are not what is tested
	defer func(f func(string, string) error) { rename = f }(rename)
	rename = func(from, to string) error {
		err := os.Rename(from, to)
		runtime.Gosched() // let the other commit run between two renames
		return err
	}
	dir := memDir(t)
	model := filepath.Join(dir, "m.safetensors")
	for i := range 1000 {
		errc := make(chan error, 2)
		for _, who := range []string{"a", "b"} {
			go func() { errc <- writePair(model, fmt.Sprintf("%s%d", who, i)) }()
		}
		for range 2 {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		if m, man := read(t, model), read(t, model+".manifest.json"); m != man {
			t.Fatalf("pair %d: model from %s, manifest from %s", i, m, man)
		}
	}
	if l := leftovers(t, dir); len(l) != 0 || Live() != 0 {
		t.Fatalf("temporary files left: %v (live %d)", l, Live())
	}
}

// A writer handed a transaction's temporary path that writes atomically
// itself (WriteFile) writes straight into it: no temporary file of a
// temporary file, whose name would reach messages. Messages through
// NameTargets name the user's path.
func TestWriteIntoTransactionFileIsDirect(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "d.npz")
	var tx Tx
	defer tx.Abort()
	tmp, err := tx.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteFile(tmp, func(w io.Writer) error {
		if l := leftovers(t, dir); len(l) != 1 {
			t.Errorf("temporary files while writing: %v, want only the transaction's", l)
		}
		return fmt.Errorf("encoding %s: %w", tmp, errors.ErrUnsupported)
	})
	msg := tx.NameTargets(err).Error()
	if !errors.Is(tx.NameTargets(err), errors.ErrUnsupported) || strings.Contains(msg, tempPrefix) || !strings.Contains(msg, out) {
		t.Fatalf("message %q: want the user's path %s and no temporary name", msg, out)
	}
	if err := WriteFile(tmp, writeString("x")); err != nil || read(t, tmp) != "x" {
		t.Fatalf("write into the transaction's file: %v", err)
	}
}

// A rename that fails at commit time (simulated) is reported under the
// user's path, and leaves no temporary or backup file.
func TestFailedRenameNamesUserPath(t *testing.T) {
	defer func(f func(string, string) error) { rename = f }(rename)
	rename = func(from, to string) error {
		if strings.HasSuffix(to, ".json") {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EPERM}
		}
		return os.Rename(from, to)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "m.safetensors")
	os.WriteFile(out, []byte("old"), 0o644)
	err := writePair(out, "new")
	if err == nil || strings.Contains(err.Error(), tempPrefix) || !strings.Contains(err.Error(), out) {
		t.Fatalf("error %v: want one naming %s and no temporary file", err, out)
	}
	if read(t, out) != "old" {
		t.Fatal("the model was replaced although its manifest was not")
	}
	if err := CheckWritable(out + ".manifest.json"); !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "cannot be renamed") {
		t.Fatalf("CheckWritable where renames fail = %v, want an ErrInput saying so", err)
	}
	if l := leftovers(t, dir); len(l) != 0 || Live() != 0 {
		t.Fatalf("temporary files left: %v (live %d)", l, Live())
	}
}

// An append-only directory (chattr +a) lets files be created but not
// renamed or removed: CheckWritable refuses it before creating anything.
func TestAppendOnlyDirectoryRefusedBeforeAnyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ao")
	os.Mkdir(dir, 0o755)
	if out, err := exec.Command("chattr", "+a", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +a is not available here: %v %s", err, out)
	}
	defer exec.Command("chattr", "-a", dir).Run()
	err := CheckWritable(filepath.Join(dir, "m.safetensors"))
	if !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("CheckWritable = %v, want an ErrInput naming the attribute", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files left in the append-only directory: %v", entries)
	}
}
