package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/relurec/relurec/internal/parallel"
)

// One output writer for every command. Each test names the failure it
// guards against.

// learn twolayer --out /dev/null, run as root, must not replace the device
// with a regular file.
func TestOutputToDeviceRefusedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", os.DevNull)
	if code != exitBadInput || !strings.Contains(errs, "not a regular file") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the device", code, errs)
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device", os.DevNull)
	}
}

// A symbolic link given as --out is kept and its target written, not
// replaced by a plain file.
func TestOutputSymlinkKeptAndTargetWritten(t *testing.T) {
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	real := filepath.Join(dir, "models", "v1.safetensors")
	os.Mkdir(filepath.Dir(real), 0o755)
	link := filepath.Join(dir, "latest.safetensors")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(real, []byte("old"), 0o644)
	if code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", link); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symbolic link was replaced by a file")
	}
	if b, _ := os.ReadFile(real); string(b) == "old" {
		t.Fatal("the link's target was not written")
	}
}

// When the manifest cannot be written (a directory named
// out.safetensors.manifest.json, or a name too long), the user's previous
// model stays: the model is not renamed over it first. The check comes
// before any work: given an --x that is not an array, the output is what is
// refused, not the data.
func TestFailingManifestKeepsPreviousModel(t *testing.T) {
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	out := filepath.Join(dir, "m.safetensors")
	os.WriteFile(out, []byte("previous model"), 0o644)
	os.Mkdir(out+".manifest.json", 0o755)
	notArray := filepath.Join(dir, "not-an-array.npy")
	os.WriteFile(notArray, []byte("not an array"), 0o644)
	code, _, errs := cli(t, "learn", "twolayer", "--x", notArray, "--y", y, "--out", out)
	if code != exitBadInput || !strings.Contains(errs, "manifest") || strings.Contains(errs, "not-an-array") {
		t.Fatalf("exit %d, stderr %q; want 2 for the manifest, before the data are read", code, errs)
	}
	if b, _ := os.ReadFile(out); string(b) != "previous model" {
		t.Fatal("the previous model was lost")
	}
	long := filepath.Join(dir, strings.Repeat("m", 240)+".safetensors") // its manifest's name is too long
	if code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", long); code != exitBadInput {
		t.Fatalf("over-long manifest name: exit %d, %s", code, errs)
	}
	leftover, _ := filepath.Glob(filepath.Join(dir, ".relurec-tmp-*"))
	if len(leftover) != 0 {
		t.Fatalf("temporary files left: %v", leftover)
	}
}

// gen twolayer --model-out a.npy.manifest.json, which would overwrite the
// manifest of the --x output, is refused.
func TestOutputCollidingWithAnotherOutputsManifestRefused(t *testing.T) {
	dir := t.TempDir()
	x, y := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	code, _, errs := cli(t, "gen", "twolayer", "--n", "500", "--x", x, "--y", y, "--model-out", x+".manifest.json")
	if code != exitBadInput || !strings.Contains(errs, "same file") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(x); err == nil {
		t.Fatal("outputs written although two of them collide")
	}
}

// Write permission is checked before the computation.
func TestReadOnlyDirectoryRefusedBeforeWork(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", filepath.Join(ro, "m.safetensors"))
	if code != exitBadInput || !strings.Contains(errs, "permission") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// A cancelled gen (Ctrl-C) leaves the previous output as it was.
func TestCancelledGenLeavesOutputAsItWas(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "d.npz")
	os.WriteFile(out, []byte("previous"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var so, se strings.Builder
	code := run(ctx, []string{"gen", "twolayer", "--n", "500", "--out", out}, &so, &se)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitInterrupted, se.String())
	}
	if b, _ := os.ReadFile(out); string(b) != "previous" {
		t.Fatal("a cancelled gen replaced the output")
	}
	leftover, _ := filepath.Glob(filepath.Join(dir, ".relurec-tmp-*"))
	if len(leftover) != 0 {
		t.Fatalf("temporary files left: %v", leftover)
	}
}

// A panic exits 1 with a hint to report it, not 2, which the README
// promises for bad input.
func TestPanicExitsOneWithReportHint(t *testing.T) {
	var se strings.Builder
	code := func() (code int) {
		defer reportPanic(&se, &code)
		var m map[string]int
		m["x"] = 1 // a bug
		return exitOK
	}()
	if code != exitFailure || !strings.Contains(se.String(), "please report") {
		t.Fatalf("exit %d, stderr %q; want 1 and a report hint", code, se.String())
	}
}

// A panic inside a parallel worker reaches main as *parallel.WorkerPanic:
// exit 1, and with RELUREC_TRACEBACK the worker's own stack is printed
// (the stack of main's recover alone would not show where it happened).
func TestWorkerPanicShowsWorkerStack(t *testing.T) {
	t.Setenv("RELUREC_TRACEBACK", "1")
	var se strings.Builder
	code := func() (code int) {
		defer reportPanic(&se, &code)
		parallel.For(4, func(_, i int) {
			if i == 3 {
				panic("bug in task 3")
			}
		})
		return exitOK
	}()
	if code != exitFailure || !strings.Contains(se.String(), "bug in task 3") || !strings.Contains(se.String(), "worker stack:") {
		t.Fatalf("exit %d, stderr %q", code, se.String())
	}
}

// failingWriter is a stdout whose every write fails, as /dev/full does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// A run whose report cannot be written (stdout on a full disk, or closed)
// exits non-zero and changes no file: the report is printed before the
// outputs are renamed into place, in text mode as with --json.
func TestUnwritableReportChangesNoOutput(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d.npz")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "6", "--k", "3", "--m", "4", "--n", "2000", "--out", data); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "m.safetensors")
	os.WriteFile(out, []byte("previous model"), 0o644)
	os.WriteFile(out+".manifest.json", []byte("previous manifest"), 0o644)
	closed, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for _, tc := range []struct {
		name   string
		stdout io.Writer
		json   bool
	}{{"full, --json", failingWriter{}, true}, {"full, text", failingWriter{}, false}, {"closed, text", closed, false}} {
		args := []string{"learn", "twolayer", "--data", data, "--hidden", "3", "--out", out}
		if tc.json {
			args = append(args, "--json")
		}
		var se strings.Builder
		code := run(context.Background(), args, tc.stdout, &se)
		if code == exitOK || !strings.Contains(se.String(), "no output file was changed") {
			t.Errorf("%s: exit %d, stderr %q; want a failure saying nothing changed", tc.name, code, se.String())
		}
		if b, _ := os.ReadFile(out); string(b) != "previous model" {
			t.Errorf("%s: the model was replaced by a run that failed", tc.name)
		}
		if b, _ := os.ReadFile(out + ".manifest.json"); string(b) != "previous manifest" {
			t.Errorf("%s: the manifest was replaced by a run that failed", tc.name)
		}
	}
	if leftover, _ := filepath.Glob(filepath.Join(dir, ".relurec-tmp-*")); len(leftover) != 0 {
		t.Fatalf("temporary files left: %v", leftover)
	}
}
