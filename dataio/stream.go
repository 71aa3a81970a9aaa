package dataio

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"

	"gonum.org/v1/gonum/mat"
)

// WriteNPYTo writes m to w as one float64 .npy array: the bytes WriteNPY
// puts in a file, for a pipe to another process
// (numpy.lib.format.read_array reads exactly one).
func WriteNPYTo(w io.Writer, m *mat.Dense) error {
	if err := checkWritable(m); err != nil {
		return err
	}
	return encodeNPY(w, m)
}

// ReadNPYFrom reads one .npy array from r and stops right after its last
// byte, so a stream of arrays (a process writing one reply per request with
// numpy.lib.format.write_array) can be read one at a time; pass the same
// buffered reader every time. The stream's length is unknown, so no size in
// the header is trusted: the matrix grows with the data that arrive and the
// memory budget applies. Reading stops with ctx's error when ctx is done.
func ReadNPYFrom(ctx context.Context, r *bufio.Reader) (*mat.Dense, error) {
	return ReadNPYFromShape(ctx, r, 0, 0)
}

// ReadNPYFromShape is ReadNPYFrom for an array whose shape the reader knows
// in advance, such as the reply to a request: rows × cols, where 0 accepts
// any count. A header that declares another shape is refused (an error
// wrapping ErrFormat) before any of its data is read, so a peer answering
// with the wrong array costs the bytes of its header, never those it
// announces; a declared shape the memory budget cannot hold is refused
// the same way.
func ReadNPYFromShape(ctx context.Context, r *bufio.Reader, rows, cols int) (*mat.Dense, error) {
	cfg := readCfg{ctx: ctx}
	in := cfg.reader(r)
	l, err := readNPYLayout(in, -1)
	if err != nil {
		return nil, err
	}
	if (rows > 0 && l.rows != rows) || (cols > 0 && l.cols != cols) {
		return nil, fmt.Errorf("the array's header declares shape %v; expected %s × %s: %w", l.hdr.shape, countText(rows), countText(cols), ErrFormat)
	}
	if err := checkBudget(cfg.rowsKept(l.rows), l.cols); err != nil {
		return nil, err
	}
	return l.decode(in, false, cfg)
}

// countText is n for a message, or "any" for 0.
func countText(n int) string {
	if n == 0 {
		return "any"
	}
	return strconv.Itoa(n)
}
