package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relurec/relurec/modelfile"
)

// Bounded reading, and a memory budget the user can raise.

// A 130 KB IDX .gz whose header declares more than it holds exits 2 naming
// the declared and the present size, before allocating (unchecked, it
// reaches 1.6 GB and, under a memory limit, a Go fatal error).
func TestIDXBombExitsTwoNamingSizes(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte{0, 0, 0x08, 2})
	binary.Write(zw, binary.BigEndian, []uint32{1000000, 1000}) // 1 GB declared
	zw.Write(make([]byte, 16<<20))                              // 16 MiB present
	zw.Close()
	x := filepath.Join(dir, "x-ubyte.gz")
	os.WriteFile(x, buf.Bytes(), 0o644)
	_, y, _ := genSmall(t, dir)
	out := filepath.Join(dir, "m.safetensors")
	code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", out)
	if code != exitBadInput || !strings.Contains(errs, "declare 1000000000 data bytes") || !strings.Contains(errs, "holds 16777216") {
		t.Fatalf("exit %d, stderr %q; want 2 naming 1000000000 declared and 16777216 present", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a model was written")
	}
}

// --max-memory sets the budget: a file bigger than it exits 2 before it is
// loaded, the message says how to raise it; a malformed size is a usage
// error; gen refuses a run whose arrays (teacher and hidden layer
// included) would not fit.
func TestMaxMemory(t *testing.T) {
	dir := t.TempDir()
	x, y, _ := genSmall(t, dir)
	out := filepath.Join(dir, "m.safetensors")
	code, _, errs := cli(t, "--max-memory", "10kB", "learn", "twolayer", "--x", x, "--y", y, "--out", out)
	if code != exitBadInput || !strings.Contains(errs, "memory budget is 10.0 kB") || !strings.Contains(errs, "--max-memory") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the 10 kB budget and the flag", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a model was written")
	}
	if code, _, errs := cli(t, "--max-memory", "lots", "learn", "twolayer", "--x", x, "--y", y, "--out", out); code != exitBadInput || !strings.Contains(errs, "--max-memory") {
		t.Fatalf("--max-memory lots: exit %d, stderr %q", code, errs)
	}
	// The budget of one run does not leak into the next (the CLI runs
	// in-process here).
	if code, _, errs := cli(t, "learn", "twolayer", "--x", x, "--y", y, "--out", out); code != 0 {
		t.Fatalf("default budget: exit %d, stderr %q", code, errs)
	}

	// gen: 1000 × (20 + 5 + 8) float64 is 264 kB: over a 200 kB budget
	// only because of the hidden layer.
	data := filepath.Join(dir, "g.npz")
	code, _, errs = cli(t, "--max-memory", "200kB", "gen", "twolayer", "--d", "20", "--k", "5", "--m", "8", "--n", "1000", "--out", data)
	if code != exitBadInput || !strings.Contains(errs, "hidden layer") || !strings.Contains(errs, "200 kB") {
		t.Fatalf("gen over budget: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatal("gen wrote data over budget")
	}
	if code, _, errs := cli(t, "--max-memory", "300kB", "gen", "twolayer", "--d", "20", "--k", "5", "--m", "8", "--n", "1000", "--out", data); code != 0 {
		t.Fatalf("gen within budget: exit %d, stderr %q", code, errs)
	}
}

// gen --model-out follows its extension like --out does, whatever the
// default: .onnx writes ONNX, an unknown one exits 2 before anything is
// generated.
func TestGenModelOutFormat(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range [][]string{{"gen", "twolayer", "--d", "6", "--k", "2", "--m", "3"}, {"gen", "depth2", "--d", "6", "--m", "2", "--outputs", "3"}} {
		data := filepath.Join(dir, cmd[1]+".npz")
		onnx := filepath.Join(dir, cmd[1]+".onnx")
		if code, _, errs := cli(t, append(cmd, "--n", "100", "--out", data, "--model-out", onnx)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", cmd, code, errs)
		}
		if _, err := modelfile.LoadONNX(onnx); err != nil {
			t.Fatalf("%v: --model-out .onnx is not ONNX: %v", cmd, err)
		}
		bad := filepath.Join(dir, cmd[1]+".pt")
		code, _, errs := cli(t, append(cmd, "--n", "100", "--out", filepath.Join(dir, "other.npz"), "--model-out", bad)...)
		if code != exitBadInput || !strings.Contains(errs, "--model-out") {
			t.Fatalf("%v --model-out x.pt: exit %d, stderr %q", cmd, code, errs)
		}
		if _, err := os.Stat(filepath.Join(dir, "other.npz")); !os.IsNotExist(err) {
			t.Fatalf("%v: data written although --model-out was refused", cmd)
		}
	}
}
