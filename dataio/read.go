package dataio

import (
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/gonum/mat"
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
func ReadMatrix(path, name string) (*mat.Dense, error) {
	if isIDXPath(path) {
		return readIDXMatrix(path)
	}
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".npy":
		return readNPYFile(path)
	case ".npz":
		return readNPZFile(path, name)
	case ".csv":
		return readCSVFile(path)
	default:
		return nil, fmt.Errorf("%s: unsupported file extension %q; expected .npy, .npz or .csv (save from numpy with np.save / np.savez): %w", path, ext, ErrFormat)
	}
}
