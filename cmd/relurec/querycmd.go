package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strings"
	"sync"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// queryCommand is a model that lives in another process: "sh -c CMD" is
// started once, and each batch of queries is one .npy array written to its
// standard input and one .npy array read back from its standard output
// (numpy.lib.format.read_array / write_array in a loop; see extractLong).
// It is the only access extract has to such a model.
type queryCommand struct {
	cmdline string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	stderr  *tailBuffer
	outputs int // columns of the first reply; every reply must match
}

// startQueryCommand starts cmdline under sh -c, stopped with ctx.
func startQueryCommand(ctx context.Context, cmdline string) (*queryCommand, error) {
	q := &queryCommand{cmdline: cmdline, stderr: &tailBuffer{max: 4096}}
	q.cmd = exec.CommandContext(ctx, "sh", "-c", cmdline)
	q.cmd.Stderr = q.stderr
	in, err := q.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := q.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := q.cmd.Start(); err != nil {
		return nil, inputErrorf("--query-cmd %q: cannot start it: %v", cmdline, err)
	}
	q.stdin, q.stdout = in, bufio.NewReaderSize(out, 1<<16)
	return q, nil
}

// query sends X and returns the command's reply, checked: as many rows as
// X, the same number of columns every time, every value finite.
func (q *queryCommand) query(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() { // written concurrently, so a reply that starts early cannot block
		defer wg.Done()
		werr = dataio.WriteNPYTo(q.stdin, X)
	}()
	Y, rerr := dataio.ReadNPYFrom(ctx, q.stdout)
	wg.Wait()
	if rerr != nil || werr != nil {
		err := rerr
		if err == nil {
			err = werr
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, inputErrorf("--query-cmd %q: no valid .npy reply to %d queries (%v)%s; it must read arrays from stdin and write one array per request to stdout, e.g. with numpy.lib.format.read_array/write_array (see relurec extract --help)", q.cmdline, X.RawMatrix().Rows, err, q.stderr.note())
	}
	n, _ := X.Dims()
	r, c := Y.Dims()
	if q.outputs == 0 {
		q.outputs = c
	}
	if r != n || c != q.outputs {
		return nil, inputErrorf("--query-cmd %q: answered %d queries with a %d×%d array; expected %d×%d", q.cmdline, n, r, c, n, q.outputs)
	}
	for i, v := range Y.RawMatrix().Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, inputErrorf("--query-cmd %q: reply row %d holds %v; the model's outputs must be finite", q.cmdline, i/c, v)
		}
	}
	return Y, nil
}

// close ends the command (end of its input) and waits for it.
func (q *queryCommand) close() {
	q.stdin.Close()
	_ = q.cmd.Wait()
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
