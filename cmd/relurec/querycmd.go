package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// queryCommand is a model that lives in another process: "sh -c CMD" is
// started once, and each batch of queries is one .npy array written to its
// standard input and one .npy array read back from its standard output
// (numpy.lib.format.read_array / write_array in a loop; see extractLong).
// It is the only access extract has to such a model.
//
// The command runs in a process group of its own, which relurec ends on
// every path out: at the end of the session (stdin closed, a grace to exit,
// then SIGTERM and SIGKILL), at the first bad or late reply, and on an
// interrupt (SIGKILL at once). Each batch is written and answered within
// timeout, and a reply is read only as far as its header when it announces
// a shape other than the batch's, so neither a silent nor a flooding
// command can stall or swamp relurec.
type queryCommand struct {
	cmdline string
	timeout time.Duration
	cmd     *exec.Cmd
	in      *os.File      // the command's stdin (our end)
	out     *os.File      // its stdout (our end)
	reply   *bufio.Reader // reads out
	errOut  *os.File      // its stderr (our end), copied into stderr
	stderr  *tailBuffer
	// exited is closed once the command's process has exited and been
	// reaped; stderrDone once its stderr is at end of file.
	exited, stderrDone chan struct{}
	outputs            int // columns of the first reply; every reply must match
	stopped            sync.Once
}

// exitGrace is how long a command has to exit by itself once its input has
// ended, and again after SIGTERM, at the end of a session (a variable so
// that tests can shorten it).
var exitGrace = time.Second

// stderrLinger bounds the wait for the end of a stopped command's stderr
// (held open by a process that left its group), for the error message.
const stderrLinger = 200 * time.Millisecond

// startQueryCommand starts cmdline under sh -c in a new process group.
// Each batch must be written and answered within timeout.
func startQueryCommand(cmdline string, timeout time.Duration) (*queryCommand, error) {
	var ends [6]*os.File // read, write ends of stdin, stdout, stderr
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(ends[:]...)
			return nil, err
		}
		ends[2*i], ends[2*i+1] = r, w
	}
	q := &queryCommand{cmdline: cmdline, timeout: timeout, in: ends[1], out: ends[2], errOut: ends[4],
		stderr: &tailBuffer{max: 4096}, exited: make(chan struct{}), stderrDone: make(chan struct{})}
	q.cmd = exec.Command("sh", "-c", cmdline)
	q.cmd.Stdin, q.cmd.Stdout, q.cmd.Stderr = ends[0], ends[3], ends[5]
	err := startChild(q.cmd)
	closeAll(ends[0], ends[3], ends[5]) // the command's ends: its copies remain
	if err != nil {
		closeAll(q.in, q.out, q.errOut)
		return nil, inputErrorf("--query-cmd %q: cannot start it: %v", cmdline, err)
	}
	q.reply = bufio.NewReaderSize(q.out, 1<<16)
	go func() {
		_, _ = io.Copy(q.stderr, q.errOut)
		close(q.stderrDone)
	}()
	go func() {
		_ = q.cmd.Wait()
		close(q.exited)
	}()
	return q, nil
}

// query sends X and returns the command's reply, checked: as many rows as
// X, the same number of columns every time (both before the data are read),
// every value finite. Any failure ends the command.
func (q *queryCommand) query(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
	n, _ := X.Dims()
	deadline := time.Now().Add(q.timeout)
	q.in.SetWriteDeadline(deadline)
	q.out.SetReadDeadline(deadline)
	// An interrupt ends a write or read blocked on the pipes at once.
	defer context.AfterFunc(ctx, func() { q.expire() })()
	written := make(chan error, 1)
	go func() { // concurrently, so a reply that starts early cannot block
		written <- dataio.WriteNPYTo(q.in, X)
	}()
	Y, err := dataio.ReadNPYFromShape(ctx, q.reply, n, q.outputs)
	if err != nil {
		q.kill() // also ends the write: its reader is gone
	}
	if werr := <-written; err == nil && werr != nil {
		err = werr
		q.kill()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, inputErrorf("--query-cmd %q: no complete reply to %d queries within --query-timeout %v%s; raise --query-timeout if the model is that slow, else check that it writes one .npy array per request to stdout and flushes it (see relurec extract --help)", q.cmdline, n, q.timeout, q.stderr.note())
		}
		return nil, inputErrorf("--query-cmd %q: no valid .npy reply to %d queries (%v)%s; it must read arrays from stdin and write one array per request to stdout, e.g. with numpy.lib.format.read_array/write_array (see relurec extract --help)", q.cmdline, n, err, q.stderr.note())
	}
	_, c := Y.Dims()
	q.outputs = c
	for i, v := range Y.RawMatrix().Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			q.kill()
			return nil, inputErrorf("--query-cmd %q: reply row %d holds %v; the model's outputs must be finite", q.cmdline, i/c, v)
		}
	}
	return Y, nil
}

// expire makes every pending and future read and write on the command's
// pipes fail at once.
func (q *queryCommand) expire() {
	now := time.Now()
	q.in.SetWriteDeadline(now)
	q.out.SetReadDeadline(now)
}

// finish ends the session the protocol's way: the command's input ends and
// it has exitGrace to exit; then its group gets SIGTERM and, once the
// command has exited or after the same grace, SIGKILL. An interrupt (ctx)
// cuts the graces short.
func (q *queryCommand) finish(ctx context.Context) {
	q.stop(ctx, true)
}

// kill ends the command and its whole process group at once (SIGKILL).
func (q *queryCommand) kill() {
	q.stop(context.Background(), false)
}

// stop closes the command's input and, when graceful, waits for it to exit
// (see finish); then it kills the group. It returns once the command has
// been reaped and its stderr read (or stderrLinger has passed), so that no
// process of the group is left and the error messages hold the command's
// last words. Only the first call does anything; on nil (extract from a
// teacher file, no command) nothing does.
func (q *queryCommand) stop(ctx context.Context, graceful bool) {
	if q == nil {
		return
	}
	q.stopped.Do(func() {
		q.expire() // a write still pending fails now
		q.in.Close()
		if graceful && !q.waitExit(ctx, exitGrace) {
			termGroup(q.cmd.Process)
			q.waitExit(ctx, exitGrace)
		}
		killGroup(q.cmd.Process) // what remains of the group, when the leader is gone
		<-q.exited
		select {
		case <-q.stderrDone:
		case <-time.After(stderrLinger):
		}
		q.out.Close()
		q.errOut.Close()
		forgetChild(q.cmd.Process)
	})
}

// waitExit waits up to d for the command to exit; false when it has not.
func (q *queryCommand) waitExit(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-q.exited:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// tailBuffer keeps the last max bytes written to it (a command's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

// note is the command's last stderr lines for an error message, or "".
func (t *tailBuffer) note() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(t.buf.String())
	if s == "" {
		return ""
	}
	return fmt.Sprintf("; its stderr ends with: %s", s)
}
