package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stallServe is serveModel's "stall N MARKER" mode: before answering
// batch N (counting from 0) it creates the file MARKER and waits to be
// killed, so that a test can interrupt extract at a known batch.
func stallServe(mode string, answered int) {
	f := strings.Fields(mode)
	if len(f) != 3 || f[0] != "stall" {
		return
	}
	if n, _ := strconv.Atoi(f[1]); answered == n {
		os.WriteFile(f[2], nil, 0o644)
		time.Sleep(time.Hour)
	}
}

// An extraction interrupted with SIGINT (exit 130) leaves a checkpoint
// from which the same command resumes, asking the model only what the
// file lacks, and writes the same model file as an uninterrupted run; a
// finished run's checkpoint replays it without a query. One and two
// hidden layers, served by another process.
func TestExtractCheckpointResumesAfterInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relurec processes")
	}
	dir := t.TempDir()
	deepPath := saveTeacher(t, dir, []int{10, 6, 4, 3}, 5)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, teacher, hidden string
		stallAt               int
	}{
		{"10-6-3", genTeacher(t, dir, "one.safetensors", "--d", "10", "--m", "6", "--outputs", "3", "--seed", "4"), "0", 3},
		{"10-6-4-3", deepPath, "6,4", 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The server's variable is set in the command, not in the
			// environment of the relurec process, which would make it a
			// server too.
			server := fmt.Sprintf("%s='%s' '%s'", serveEnv, c.teacher, self)
			args := func(out, ckpt string) []string {
				a := []string{"extract", "--query-cmd", server, "--d", "10", "--hidden", c.hidden, "--out", filepath.Join(dir, out), "--json", "--quiet"}
				if ckpt != "" {
					a = append(a, "--checkpoint", filepath.Join(dir, ckpt))
				}
				return a
			}
			code, stdout, errs := cli(t, args(c.name+"-ref.safetensors", "")...)
			if code != 0 {
				t.Fatalf("uninterrupted run: exit %d: %s", code, errs)
			}
			queries := decodeOne(t, stdout)["queries"].(float64)

			// Interrupted while the server holds batch stallAt.
			marker := filepath.Join(dir, c.name+".stalled")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args(c.name+".safetensors", c.name+".ckpt"), "\x1f"),
				serveModeEnv+"="+fmt.Sprintf("stall %d %s", c.stallAt, marker))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the server never reached the batch to stall at: %s", stderr.String())
				}
			}
			cmd.Process.Signal(syscall.SIGINT)
			var ee *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("interrupted run: %v, want exit %d", err, exitInterrupted)
			}
			if _, err := os.Stat(filepath.Join(dir, c.name+".safetensors")); err == nil {
				t.Fatalf("the interrupted run wrote its model")
			}

			code, stdout, errs = cli(t, args(c.name+".safetensors", c.name+".ckpt")...)
			if code != 0 {
				t.Fatalf("resumed run: exit %d: %s", code, errs)
			}
			res := decodeOne(t, stdout)
			ck := res["checkpoint"].(map[string]any)
			t.Logf("%v queries; resumed: %v replayed, %v sent", queries, ck["replayed"], ck["sent"])
			if res["queries"].(float64) != queries || ck["replayed"].(float64) <= 0 || ck["replayed"].(float64)+ck["sent"].(float64) != queries {
				t.Errorf("resumed run: %v queries, checkpoint %v; the uninterrupted run sent %v", res["queries"], ck, queries)
			}
			ref, _ := os.ReadFile(filepath.Join(dir, c.name+"-ref.safetensors"))
			got, _ := os.ReadFile(filepath.Join(dir, c.name+".safetensors"))
			if len(ref) == 0 || !bytes.Equal(ref, got) {
				t.Errorf("the resumed run's model file differs from the uninterrupted run's")
			}

			// The finished checkpoint replays the run: no query sent.
			code, stdout, errs = cli(t, args(c.name+"-again.safetensors", c.name+".ckpt")...)
			if code != 0 {
				t.Fatalf("replay: exit %d: %s", code, errs)
			}
			if ck := decodeOne(t, stdout)["checkpoint"].(map[string]any); ck["sent"].(float64) != 0 || ck["replayed"].(float64) != queries {
				t.Errorf("replay: checkpoint %v, want all %v queries replayed", ck, queries)
			}
			again, _ := os.ReadFile(filepath.Join(dir, c.name+"-again.safetensors"))
			if !bytes.Equal(ref, again) {
				t.Errorf("the replayed run's model file differs")
			}
		})
	}
}

// A checkpoint written for another extraction (another seed, another
// model) exits 2 naming the difference, with the file unchanged and
// nothing written; the table reports the queries replayed; a checkpoint
// that is also an input or output exits 2.
func TestExtractCheckpointRefusesAnotherExtraction(t *testing.T) {
	dir := t.TempDir()
	teacher := genTeacher(t, dir, "t.safetensors", "--d", "10", "--m", "6", "--outputs", "3", "--seed", "4")
	other := genTeacher(t, dir, "u.safetensors", "--d", "10", "--m", "6", "--outputs", "3", "--seed", "5")
	ckpt, out := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "x.safetensors")
	if code, _, errs := cli(t, "extract", "--teacher", teacher, "--checkpoint", ckpt, "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	before, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(out)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--teacher", teacher, "--seed", "2"}, "--seed 0 (this run: 2)"},
		{[]string{"--teacher", other}, "the model"},
		{[]string{"--teacher", teacher, "--hidden", "6"}, "--hidden 0 (this run: 6)"},
	} {
		code, _, errs := cli(t, append([]string{"extract", "--checkpoint", ckpt, "--out", out}, c.args...)...)
		if code != exitBadInput || !strings.Contains(errs, c.want) || !strings.Contains(errs, "delete it") {
			t.Errorf("%v: exit %d, want %d naming %q: %s", c.args, code, exitBadInput, c.want, errs)
		}
	}
	if after, _ := os.ReadFile(ckpt); !bytes.Equal(before, after) {
		t.Errorf("a refused checkpoint was modified")
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run wrote its model")
	}
	if code, _, errs := cli(t, "extract", "--teacher", teacher, "--checkpoint", teacher, "--out", out); code != exitBadInput || !strings.Contains(errs, "--checkpoint") {
		t.Errorf("--checkpoint the teacher: exit %d: %s", code, errs)
	}
	code, stdout, errs := cli(t, "extract", "--teacher", teacher, "--checkpoint", ckpt, "--out", out)
	if code != 0 || !strings.Contains(stdout, "queries replayed, 0 sent to the model") {
		t.Errorf("replay: exit %d: %s\n%s", code, errs, stdout)
	}
}
