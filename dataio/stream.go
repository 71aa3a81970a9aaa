package dataio

import (
	"bufio"
	"context"
	"io"

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
	cfg := readCfg{ctx: ctx}
	return readNPY(cfg.reader(r), source{total: -1}, cfg)
}
