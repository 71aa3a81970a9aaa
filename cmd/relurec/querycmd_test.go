package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childMarkerEnv is set, to a value unique to the test, in the environment
// of the query commands a test starts: every process they start inherits
// it, so a scan of /proc finds any of them left behind.
const childMarkerEnv = "RELUREC_TEST_CHILD_MARKER"

// markChildren gives the commands the test starts from now on a marker of
// their own and returns it.
func markChildren(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc to find the processes left behind")
	}
	marker := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv(childMarkerEnv, marker)
	return marker
}

// markedProcesses returns the ids of the live processes, other than this
// one and except, whose environment holds marker (a zombie's is empty).
func markedProcesses(marker string, except int) []int {
	entries, _ := os.ReadDir("/proc")
	want := []byte(childMarkerEnv + "=" + marker + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || pid == except {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && bytes.Contains(env, want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// checkNoneLeft fails the test when processes carrying marker are still
// alive 10 s from now (SIGKILL takes effect asynchronously), and kills them.
func checkNoneLeft(t *testing.T, what, marker string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := markedProcesses(marker, 0)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, pid := range left {
				cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				names = append(names, strconv.Itoa(pid)+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
			t.Errorf("%s: processes of the query command left running: %v", what, names)
			return
		}
	}
}

// cliWithin is cli with a deadline that detects a hang: a run still going
// after limit fails the test.
func cliWithin(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		done <- result{code, out.String(), errb.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(limit):
		t.Fatalf("relurec %s: still running after %v", strings.Join(args, " "), limit)
		return 0, "", ""
	}
}

// Every way a --query-cmd server can misbehave ends extract promptly with
// exit 2 and a message naming the problem, writes nothing, and leaves none of
// the server's processes behind (its whole process group is killed): a
// server printing garbage (with a background sleep of its own), one
// announcing 1 GiB of rows (refused after its header: the memory allocated
// stays far below the gigabyte), one announcing more columns than
// --max-memory allows, one that never answers and one that reads and never
// answers (both ended by --query-timeout). A correct server that does not
// exit at the end of its input, and ignores SIGTERM, is killed after the
// grace: exit 0 with the model written.
func TestQueryCommandMisbehavingServersEndAndLeaveNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts query servers")
	}
	marker := markChildren(t)
	dir := t.TempDir()
	teacher := filepath.Join(dir, "teacher.safetensors")
	if code, _, errs := cli(t, "gen", "depth2", "--d", "6", "--m", "3", "--outputs", "2", "--n", "100", "--seed", "4", "--out", filepath.Join(dir, "unused.npz"), "--model-out", teacher, "--quiet"); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, errs)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(serveEnv, teacher)
	defer func(g time.Duration) { exitGrace = g }(exitGrace)
	exitGrace = 100 * time.Millisecond
	for _, c := range []struct {
		name, cmd, mode string
		flags           []string
		code            int
		want            string
	}{
		{"garbage", "sleep 1000 & yes garbage", "", nil, exitBadInput, "NUMPY magic"},
		{"1 GiB of rows", exe, "huge-rows", nil, exitBadInput, "134217728"},
		{"columns beyond --max-memory", exe, "huge-cols", []string{"--max-memory", "100MB"}, exitBadInput, "memory budget"},
		{"silent", "sleep 1000", "", []string{"--query-timeout", "300ms"}, exitBadInput, "within --query-timeout 300ms"},
		{"reads, never answers", "cat >/dev/null", "", []string{"--query-timeout", "300ms"}, exitBadInput, "within --query-timeout 300ms"},
		{"answers, never exits", exe, "linger", nil, exitOK, ""},
	} {
		t.Setenv(serveModeEnv, c.mode)
		out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		code, _, errs := cliWithin(t, time.Minute, append([]string{"extract", "--query-cmd", c.cmd, "--d", "6", "--out", out, "--quiet"}, c.flags...)...)
		runtime.ReadMemStats(&after)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want %d with %q: %s", c.name, code, c.code, c.want, errs)
		}
		if _, err := os.Stat(out); (err == nil) != (c.code == exitOK) {
			t.Errorf("%s: exit %d and the model file exists: %v", c.name, code, err == nil)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
			t.Errorf("%s: %d MB allocated", c.name, alloc>>20)
		}
		checkNoneLeft(t, c.name, marker)
		t.Logf("%s: exit %d, %d MB allocated: %.200s", c.name, code, (after.TotalAlloc-before.TotalAlloc)>>20, errs)
	}
}

// SIGINT and SIGTERM during a --query-cmd extraction (the server silent, so
// relurec waits on it) exit 130 and 143, 128 + the signal's number, say the
// output was left as it was, write nothing, and leave none of the server's
// processes (a shell, a background sleep and a cat) running.
func TestQueryCommandInterruptedLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relurec processes")
	}
	marker := markChildren(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		out := filepath.Join(t.TempDir(), "x.safetensors")
		args := []string{"extract", "--query-cmd", "sleep 1000 & cat >/dev/null", "--d", "6", "--out", out}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\x1f"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The server runs, so relurec's signal handler is installed.
		for deadline := time.Now().Add(30 * time.Second); len(markedProcesses(marker, cmd.Process.Pid)) < 3; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%v: the query server did not start: %s", sig, stderr.String())
			}
		}
		cmd.Process.Signal(sig)
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		var err error
		select {
		case err = <-waited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%v: relurec still running 30 s after the signal", sig)
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if want := 128 + int(sig); code != want || !strings.Contains(stderr.String(), "interrupted; outputs left as they were") {
			t.Errorf("%v: exit %d, want %d: %s", sig, code, want, stderr.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: %s written", sig, out)
		}
		checkNoneLeft(t, sig.String(), marker)
		t.Logf("%v: exit %d: %s", sig, code, strings.TrimSpace(stderr.String()))
	}
}
