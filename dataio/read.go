package dataio

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/boundedio"
)

// ReadMatrix reads a 2-D numeric array (rows are samples) from path, choosing
// the format by the file's extension, case-insensitively:
//
//   - .npy: any of float16/32/64, int8..int64, uint8..uint64 and bool, either
//     byte order, C or Fortran order; a 1-D array becomes an n×1 column and a
//     0-d scalar a 1×1 matrix.
//   - .npz: the member called name ("X" or "X.npy"); with name == "" an archive
//     holding exactly one array yields that array. A missing name gives an
//     error wrapping ErrNotFound that lists the names present.
//   - .csv: comma-separated numbers, as numpy.loadtxt(delimiter=",") reads
//     them; a first row with no numeric field is a header and is skipped, as
//     are blank lines, '#' lines and a UTF-8 BOM. A non-number, or a number
//     beyond ±1.8e308, is an error naming its line and column.
//   - IDX (names ending in "-ubyte" or ".idx", optionally gzipped with ".gz",
//     as the MNIST family is distributed): the first dimension gives the rows,
//     the others are flattened; values are not scaled. See ReadIDX.
//
// name is ignored for .npy and .csv. Corrupt, truncated or unsupported files
// give an error wrapping ErrFormat, empty arrays one wrapping ErrEmpty.
// Values are not checked for NaN or Inf; use CheckFinite.
//
// Memory: a matrix larger than MemoryBudget gives an error wrapping
// ErrTooLarge before it is allocated; apart from the matrix, reading takes
// a few buffers of 64 KiB, whatever the file's size or compression. A
// compressed member (a deflated .npz member, a gzipped IDX file) is
// decompressed twice, once to confirm the size it declares, so that its
// matrix is allocated once, at its final size.
func ReadMatrix(path, name string) (*mat.Dense, error) {
	return ReadMatrixContext(context.Background(), path, ReadOptions{Name: name})
}

// ReadOptions are the options of ReadMatrixContext.
type ReadOptions struct {
	// Name selects the .npz member, as in ReadMatrix.
	Name string
	// MaxRows, if positive, keeps only the first MaxRows rows: the rest of
	// a .npy (C order), .npz, .csv or IDX file is not read, so a sample of
	// a big file costs the sample's memory and time. A file with fewer rows
	// is read whole.
	MaxRows int
}

// ReadMatrixContext is ReadMatrix with options, stopping with ctx's error
// when ctx is cancelled (checked at every 64 KiB read).
func ReadMatrixContext(ctx context.Context, path string, opt ReadOptions) (*mat.Dense, error) {
	if opt.MaxRows < 0 {
		return nil, errs.Options(nil, "dataio: ", errs.Option{Struct: "ReadOptions", Field: "MaxRows"}, fmt.Sprintf(" is %d; expected 0 (all rows) or a positive count", opt.MaxRows))
	}
	cfg := readCfg{ctx: ctx, maxRows: opt.MaxRows}
	if isIDXPath(path) {
		return readIDXMatrix(path, cfg)
	}
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".npy":
		return readNPYFile(path, cfg)
	case ".npz":
		return readNPZFile(path, opt.Name, cfg)
	case ".csv":
		return readCSVFile(path, cfg)
	default:
		return nil, fmt.Errorf("%s: unsupported file extension %q; expected .npy, .npz or .csv (save from numpy with np.save / np.savez): %w", path, ext, ErrFormat)
	}
}

// readCfg is what every reader of this package is told besides the bytes.
// The zero value reads everything, without cancellation.
type readCfg struct {
	ctx     context.Context // nil: never cancelled
	maxRows int             // 0: all rows
}

// rowsKept is how many of a file's rows the reader keeps.
func (c readCfg) rowsKept(rows int) int {
	if c.maxRows > 0 && c.maxRows < rows {
		return c.maxRows
	}
	return rows
}

// reader returns r made to fail with the context's error once it is
// cancelled, so that every reader stops at its next read.
func (c readCfg) reader(r io.Reader) io.Reader {
	if c.ctx == nil || c.ctx.Done() == nil {
		return r
	}
	return ctxReader{c.ctx, r}
}

// ctxReader reads from r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// source describes the stream an array is read from.
type source struct {
	// total is the stream's length in bytes, −1 when unknown (a pipe).
	total int64
	// trusted says total is the stream's real length (a regular file,
	// bytes in memory, a stored .npz member the archive's bytes back), so
	// the matrix is allocated at once. Otherwise total is only what a
	// container declares (a zip directory entry, a gzip trailer), which a
	// few compressed bytes can contradict.
	trusted bool
	// reopen, for an untrusted stream that can be read twice (a deflated
	// .npz member, a gzipped IDX file), gives the stream again from its
	// start; see confirm. Without it (a pipe) the matrix grows with the
	// data that arrive.
	reopen func() (io.Reader, error)
	// exact says the array must fill the stream: an .npz member holds one
	// array and nothing after it, so bytes beyond the array mean the header
	// or the archive lies. A .npy file may carry more after its array
	// (np.save called twice on one open file), which numpy.load ignores,
	// and so do we.
	exact bool
}

// confirm makes an untrusted stream that can be reopened trusted, before
// its array is allocated: it reads the rest of r, the data after a header
// of offset bytes, discarding them, to check that they hold need bytes
// (with end, and nothing after them), and returns the stream reopened at
// its first data byte. A stream that yields fewer or more bytes than its
// header declares is refused having cost time but no memory; one that
// holds them gets its matrix allocated once, at its final size, rather
// than grown by doubling. Other streams are returned as they are.
func (s *source) confirm(r io.Reader, offset, need int64, end bool) (io.Reader, error) {
	if s.trusted || s.reopen == nil {
		return r, nil
	}
	limit := need
	if end {
		limit++
	}
	got, err := io.CopyN(io.Discard, r, limit)
	switch {
	case err != nil && !boundedio.IsEOF(err):
		return nil, err
	case got < need:
		return nil, fmt.Errorf("the header declares %d data bytes but the compressed data end after %d; the file is truncated or its header is wrong: %w", need, got, ErrFormat)
	case got > need:
		return nil, fmt.Errorf("the compressed data go on past the %d data bytes the header declares; the header is wrong: %w", need, ErrFormat)
	}
	again, err := s.reopen()
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, again, offset); err != nil {
		return nil, fmt.Errorf("reading the header again: %w", err)
	}
	s.trusted = true
	return again, nil
}

// growChunk is how many elements a matrix read from an untrusted stream
// that cannot be reopened (a pipe) starts with; it then grows by reserve
// as the data arrive.
const growChunk = 1 << 17

// reserve makes room in out for more elements, doubling its capacity (up to
// total elements) when it is full: a matrix of unchecked size costs at most
// twice the data that actually arrived, never what a header declares.
func reserve(out []float64, more, total int) []float64 {
	if len(out)+more <= cap(out) {
		return out
	}
	grown := make([]float64, len(out), len(out)+max(more, min(len(out), total-len(out))))
	copy(grown, out)
	return grown
}
