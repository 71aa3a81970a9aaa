package dataio

import "errors"

// Sentinel errors. Every error returned by this package that falls in one of
// these classes wraps the matching sentinel, so callers (the CLI in
// particular, which maps bad input to exit status 2) can test with errors.Is.
var (
	// ErrFormat marks a file that is corrupt, truncated, or uses a layout this
	// package does not read (for example a structured numpy dtype or a
	// 3-D array).
	ErrFormat = errors.New("unreadable or unsupported data file; expected a 2-D numeric array in .npy, .npz or comma-separated .csv")

	// ErrNotFound marks an .npz archive that lacks the requested array.
	ErrNotFound = errors.New("array not found in archive; pass one of the names present")

	// ErrEmpty marks an array with no rows or no columns: nothing can be
	// learnt from it and gonum cannot represent it.
	ErrEmpty = errors.New("array is empty; expected at least one row and one column")

	// ErrNonFinite marks a matrix that holds NaN or ±Inf.
	ErrNonFinite = errors.New("NaN and Inf values are not allowed; drop or impute those entries first")

	// ErrOutputIsInput marks an output path that would overwrite an input.
	ErrOutputIsInput = errors.New("refusing to overwrite an input file; choose a different output path")
)
