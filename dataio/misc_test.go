package dataio

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestCheckFinite(t *testing.T) {
	m := mat.NewDense(20, 5, nil)
	if err := CheckFinite("X", m); err != nil {
		t.Fatal(err)
	}
	m.Set(17, 3, math.NaN())
	m.Set(18, 0, math.Inf(1))
	err := CheckFinite("X", m)
	if !errors.Is(err, ErrNonFinite) || !strings.HasPrefix(err.Error(), "X has NaN at row 17, column 3") {
		t.Fatalf("got %v", err)
	}
	m.Set(17, 3, 0)
	if err := CheckFinite("Y", m); err == nil || !strings.HasPrefix(err.Error(), "Y has +Inf at row 18, column 0") {
		t.Fatalf("got %v", err)
	}
	// A view of a larger matrix, and a non-Dense matrix (transpose).
	v := m.Slice(18, 20, 0, 2)
	if err := CheckFinite("V", v); err == nil || !strings.HasPrefix(err.Error(), "V has +Inf at row 0, column 0") {
		t.Fatalf("view: %v", err)
	}
	n := mat.NewDense(2, 3, []float64{1, 2, 3, 4, math.Inf(-1), 6})
	if err := CheckFinite("W", n.T()); err == nil || !strings.HasPrefix(err.Error(), "W has -Inf at row 1, column 1") {
		t.Fatalf("transpose: %v", err)
	}
	if err := CheckFinite("ok", m.Slice(0, 17, 0, 5)); err != nil {
		t.Fatal(err)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestAtomicWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := AtomicWriteFile(p, func(w io.Writer) error {
		w.Write([]byte(strings.Repeat("new", 100000))) // more than the buffer
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want the writer's error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("old file changed to %q", b)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("temporary files left behind: %v", names)
	}

	// A panicking writer leaves no temporary file either.
	func() {
		defer func() { recover() }()
		AtomicWriteFile(p, func(w io.Writer) error { panic("writer bug") })
	}()
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("temporary files left behind after panic: %v", names)
	}

	if err := AtomicWriteFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("content %q", b)
	}
	if runtime.GOOS != "windows" {
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want the old file's 0600", st.Mode().Perm())
		}
		q := filepath.Join(dir, "fresh")
		AtomicWriteFile(q, func(w io.Writer) error { return nil })
		if st, _ := os.Stat(q); st.Mode().Perm() != 0o644 {
			t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
		}
	}
	if err := AtomicWriteFile(filepath.Join(dir, "no-such-dir", "x"), func(w io.Writer) error { return nil }); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	if err := AtomicWriteFile(dir, func(w io.Writer) error { return nil }); err == nil {
		t.Error("write over a directory succeeded")
	}
}

func TestCheckOutputNotInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.npz")
	os.WriteFile(in, []byte("x"), 0o644)
	other := filepath.Join(dir, "other.npz")
	os.WriteFile(other, []byte("y"), 0o644)

	if err := CheckOutputNotInput(in, other, in); !errors.Is(err, ErrOutputIsInput) {
		t.Fatalf("same path: %v", err)
	}
	if err := CheckOutputNotInput(filepath.Join(dir, ".", "sub", "..", "in.npz"), in); !errors.Is(err, ErrOutputIsInput) {
		t.Fatalf("uncleaned path: %v", err)
	}
	if err := CheckOutputNotInput(other, in, ""); err != nil {
		t.Fatalf("different files: %v", err)
	}
	if err := CheckOutputNotInput(filepath.Join(dir, "new.npz"), in); err != nil {
		t.Fatalf("new output: %v", err)
	}
	// Neither exists: compared by absolute path.
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, filepath.Join(dir, "ghost"))
	if err == nil {
		if err := CheckOutputNotInput(filepath.Join(dir, "ghost"), rel); !errors.Is(err, ErrOutputIsInput) {
			t.Fatalf("relative vs absolute: %v", err)
		}
	}
	if runtime.GOOS != "windows" {
		link := filepath.Join(dir, "link.npz")
		if err := os.Symlink(in, link); err == nil {
			if err := CheckOutputNotInput(link, in); !errors.Is(err, ErrOutputIsInput) {
				t.Fatalf("symlink: %v", err)
			}
		}
		hard := filepath.Join(dir, "hard.npz")
		if err := os.Link(in, hard); err == nil {
			if err := CheckOutputNotInput(hard, in); !errors.Is(err, ErrOutputIsInput) {
				t.Fatalf("hard link: %v", err)
			}
		}
	}
}

func TestManifest(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	os.WriteFile(in, []byte("abc"), 0o644)
	d, err := DigestFile(in)
	if err != nil {
		t.Fatal(err)
	}
	if d.SHA256 != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || d.Bytes != 3 || d.Path != in {
		t.Fatalf("digest %+v", d)
	}
	if _, err := DigestFile(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}

	m := NewManifest("learn twolayer", []string{"--hidden", "8"})
	if m.Tool != "relurec" || m.Version == "" || m.Go != runtime.Version() || m.CPUs < 1 || m.Started.IsZero() || m.OS != runtime.GOOS {
		t.Fatalf("manifest %+v", m)
	}
	if err := m.AddInput(in); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "model.safetensors")
	if ManifestPath(out) != out+".manifest.json" {
		t.Fatal(ManifestPath(out))
	}
	m.Options = struct {
		Hidden int `json:"hidden"`
	}{8}
	m.Seed = 7
	m.Timings["fit"] = 0.5
	m.Results = map[string]float64{"residual": 1e-14}
	m.Finish()
	if err := m.Write(ManifestPath(out)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(ManifestPath(out))
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tool", "version", "command", "args", "inputs", "outputs", "options", "seed", "started", "seconds", "timings", "results", "go", "os", "arch", "cpus"} {
		if _, ok := got[k]; !ok {
			t.Errorf("manifest JSON lacks %q:\n%s", k, b)
		}
	}
	if !strings.Contains(string(b), "\n  \"tool\": \"relurec\"") {
		t.Errorf("not indented JSON:\n%s", b)
	}
	if got["inputs"].([]any)[0].(map[string]any)["sha256"] != d.SHA256 {
		t.Errorf("inputs %v", got["inputs"])
	}
	m.Results = math.NaN()
	if err := m.Write(ManifestPath(out)); err == nil {
		t.Error("NaN result encoded")
	}
	if b2, _ := os.ReadFile(ManifestPath(out)); string(b2) != string(b) {
		t.Error("failed write changed the manifest")
	}
}

// HashInputs hashes on its own goroutine: Wait (and Write) see every input
// in order with DigestFile's hash, and an input that cannot be hashed makes
// Write fail without writing the manifest.
func TestManifestHashInputs(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	os.WriteFile(a, []byte("abc"), 0o644)
	os.WriteFile(b, bytes.Repeat([]byte("x"), 1<<20), 0o644)
	m := NewManifest("learn", nil)
	m.HashInputs(a, b)
	if err := m.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{a, b} {
		want, _ := DigestFile(p)
		if len(m.Inputs) != 2 || m.Inputs[i] != want {
			t.Fatalf("inputs %+v, want %+v at %d", m.Inputs, want, i)
		}
	}
	out := filepath.Join(dir, "m.json")
	if err := m.Write(out); err != nil {
		t.Fatal(err)
	}

	m = NewManifest("learn", nil)
	m.HashInputs(a, filepath.Join(dir, "none"))
	out = filepath.Join(dir, "m2.json")
	if err := m.Write(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing input: Write gave %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a manifest was written for an input that could not be hashed (%v)", err)
	}
	if err := m.Wait(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("second Wait: %v", err)
	}
}
