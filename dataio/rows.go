package dataio

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/boundedio"
)

// NPYRows reads a 2-D (or 1-D) C-order .npy file on disk a block of rows at
// a time, for arrays larger than the memory budget: only the caller's block
// is held, never the file. Rewind starts the next pass over the rows.
type NPYRows struct {
	path string
	f    *os.File
	br   *bufio.Reader
	l    npyLayout
	next int    // the row the next ReadRows starts at
	raw  []byte // one block's bytes as stored
}

// OpenNPYRows opens path (a regular .npy file) for reading by rows. The
// header is checked as ReadMatrix checks it (magic, version, dtype, shape
// against the bytes present); an array stored in Fortran order is refused,
// since its rows are not contiguous.
func OpenNPYRows(path string) (*NPYRows, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file; reading by rows needs a file it can read twice: %w", path, ErrFormat)
	}
	r := &NPYRows{path: path, f: f, br: bufio.NewReaderSize(f, 1<<20)}
	if r.l, err = readNPYLayout(r.br, st.Size()); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.l.hdr.fortran {
		f.Close()
		return nil, fmt.Errorf("%s: the array is stored in Fortran order, whose rows are not contiguous; save it in C order (numpy.save(path, numpy.ascontiguousarray(a))) to read it by rows: %w", path, ErrFormat)
	}
	return r, nil
}

// IsNPYFile reports whether path names a regular file with the .npy
// extension (the files OpenNPYRows reads).
func IsNPYFile(path string) bool {
	if !strings.EqualFold(filepath.Ext(path), ".npy") {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// Dims returns the array's rows and columns.
func (r *NPYRows) Dims() (rows, cols int) { return r.l.rows, r.l.cols }

// Path returns the file's path.
func (r *NPYRows) Path() string { return r.path }

// ReadRows fills dst (cols columns, any number of rows) with the next rows
// of the file and returns how many it read: fewer than dst holds only at
// the end, and 0 with io.EOF after the last row. The values are decoded to
// float64 from the file's dtype, as ReadMatrix decodes them.
func (r *NPYRows) ReadRows(ctx context.Context, dst *mat.Dense) (int, error) {
	raw := dst.RawMatrix()
	if raw.Cols != r.l.cols {
		return 0, fmt.Errorf("%s: a block of %d columns cannot hold rows of %d", r.path, raw.Cols, r.l.cols)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	rows := min(raw.Rows, r.l.rows-r.next)
	if rows == 0 {
		return 0, io.EOF
	}
	size := r.l.dt.size
	rowBytes := r.l.cols * size
	if need := rows * rowBytes; cap(r.raw) < need {
		r.raw = make([]byte, need)
	}
	b := r.raw[:rows*rowBytes]
	if _, err := io.ReadFull(r.br, b); err != nil {
		if boundedio.IsEOF(err) {
			return 0, fmt.Errorf("%s: the data end before row %d of %d; the file is truncated (or was rewritten while it was read): %w", r.path, r.next+rows, r.l.rows, ErrFormat)
		}
		return 0, fmt.Errorf("%s: %w", r.path, err)
	}
	for i := 0; i < rows; i++ {
		r.l.dt.decodeInto(raw.Data[i*raw.Stride:i*raw.Stride+r.l.cols], b[i*rowBytes:(i+1)*rowBytes])
	}
	r.next += rows
	return rows, nil
}

// Rewind positions the reader at the first row again.
func (r *NPYRows) Rewind() error {
	if _, err := r.f.Seek(r.l.offset, io.SeekStart); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	r.br.Reset(r.f)
	r.next = 0
	return nil
}

// Close closes the file.
func (r *NPYRows) Close() error { return r.f.Close() }
