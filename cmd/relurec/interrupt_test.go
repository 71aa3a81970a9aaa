package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relurec/relurec/dataio"
)

// mainArgsEnv, when set, makes the test binary run relurec's main with these
// arguments (separated by \x1f) instead of the tests, so a test can send
// real signals to a real relurec process.
const mainArgsEnv = "RELUREC_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if model, ok := os.LookupEnv(serveEnv); ok {
		serveModel(model, os.Getenv(serveModeEnv))
		return
	}
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Args = append([]string{"relurec"}, strings.Split(args, "\x1f")...)
		main()
		return
	}
	os.Exit(m.Run())
}

// Killing a command with
// SIGINT or SIGTERM at any moment leaves every output either as it was (exit
// 130/143) or complete and new (exit 0, when the signal came after the
// commit), and never a temporary file.
func TestInterruptAtAnyMomentLeavesOutputsWholeAndNoTemps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relurec processes")
	}
	src := t.TempDir()
	srcData := filepath.Join(src, "data.npz")
	if code, _, errs := cli(t, "gen", "twolayer", "--d", "20", "--k", "5", "--m", "8", "--n", "100000", "--out", srcData); code != 0 {
		t.Fatal(errs)
	}
	points := []struct {
		after time.Duration
		sig   syscall.Signal
		learn bool // learn twolayer (reading, fitting, writing) instead of gen
	}{
		// gen takes about 0.5 s in all: start-up, generation, writing.
		{20 * time.Millisecond, syscall.SIGINT, false}, {120 * time.Millisecond, syscall.SIGINT, false},
		{220 * time.Millisecond, syscall.SIGINT, false}, {320 * time.Millisecond, syscall.SIGTERM, false},
		{420 * time.Millisecond, syscall.SIGINT, false},
		// learn: during reading, then during the fit.
		{50 * time.Millisecond, syscall.SIGINT, true}, {400 * time.Millisecond, syscall.SIGTERM, true},
	}
	for _, p := range points {
		dir := t.TempDir()
		data, teacher := filepath.Join(dir, "d.npz"), filepath.Join(dir, "t.safetensors")
		os.WriteFile(data, []byte("previous data"), 0o644)
		os.WriteFile(teacher, []byte("previous teacher"), 0o644)
		args := []string{"gen", "twolayer", "--d", "40", "--k", "8", "--m", "10", "--n", "150000",
			"--out", data, "--model-out", teacher, "--quiet"}
		if p.learn {
			os.Remove(data)
			args = []string{"learn", "twolayer", "--data", srcData, "--out", teacher, "--quiet"}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\x1f"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(p.after)
		sent := time.Now()
		cmd.Process.Signal(p.sig)
		err := cmd.Wait()
		took := time.Since(sent)
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		d, _ := os.ReadFile(data)
		tt, _ := os.ReadFile(teacher)
		if p.learn {
			d = []byte("previous data") // learn writes only the model
		}
		switch code {
		case 128 + int(p.sig), -1: // -1: killed before main installed its handler
			if string(d) != "previous data" || string(tt) != "previous teacher" {
				t.Errorf("%v after %v: exit %d but the outputs changed", p.sig, p.after, code)
			}
			if _, err := os.Stat(dataio.ManifestPath(teacher)); err == nil {
				t.Errorf("%v after %v: a manifest was written by an interrupted run", p.sig, p.after)
			}
		case 0:
			if _, err := dataio.ReadMatrix(data, "X"); err != nil && !p.learn {
				t.Errorf("%v after %v: exit 0 but the data file is not whole: %v", p.sig, p.after, err)
			}
		default:
			t.Errorf("%v after %v: exit %d, want %d or 0", p.sig, p.after, code, 128+int(p.sig))
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".relurec-tmp-*")); len(left) != 0 {
			t.Errorf("%v after %v: temporary files left: %v", p.sig, p.after, left)
		}
		if took > interruptGrace+2*time.Second {
			t.Errorf("%v after %v: took %v to exit", p.sig, p.after, took)
		}
		t.Logf("%v after %v (learn %v): exit %d in %v", p.sig, p.after, p.learn, code, took.Round(time.Millisecond))
	}
}

// The outputs are committed after the result is printed: an interrupt
// while it is printed leaves them as they were and says so; once a command
// has committed them, the interrupt message names them (interruptedNote of
// the record the commit keeps).
func TestInterruptMessageFollowsTheCommit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := filepath.Join(t.TempDir(), "d.npz")
	var errb bytes.Buffer
	code := run(ctx, []string{"gen", "twolayer", "--d", "4", "--k", "2", "--m", "3", "--n", "100", "--out", out, "--json"}, interruptingWriter{cancel}, &errb)
	if code != exitInterrupted || !strings.Contains(errb.String(), "left as they were") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("an output was committed by a run interrupted while printing")
	}
	before := committedCount()
	var outb bytes.Buffer
	if code := run(context.Background(), []string{"gen", "twolayer", "--d", "4", "--k", "2", "--m", "3", "--n", "100", "--out", out, "--json"}, &outb, &errb); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errb.String())
	}
	if note := interruptedNote(committedSince(before)); !strings.Contains(note, "interrupted after writing "+out) {
		t.Errorf("after the commit the interrupt message would read %q", note)
	}
}

// interruptingWriter is a stdout that cancels the command (an interrupt)
// and fails at the first write.
type interruptingWriter struct{ cancel func() }

func (w interruptingWriter) Write(p []byte) (int, error) {
	w.cancel()
	return 0, errors.New("stdout closed")
}
