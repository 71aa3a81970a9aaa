package dataio

import "github.com/relurec/relurec/errs"

// Sentinel errors. Every error returned by this package that falls in one of
// these classes wraps the matching sentinel, so callers (the CLI in
// particular, which maps bad input to exit status 2) can test with errors.Is.
var (
	// ErrFormat marks a file that is corrupt, truncated, or uses a layout this
	// package does not read (for example a structured numpy dtype or a
	// 3-D array).
	ErrFormat = errs.New("unreadable or unsupported data file; expected a 2-D numeric array in .npy, .npz or comma-separated .csv", errs.ErrInput)

	// ErrNotFound marks an .npz archive that lacks the requested array.
	ErrNotFound = errs.New("array not found in archive; pass one of the names present", errs.ErrInput)

	// ErrEmpty marks an array with no rows or no columns: nothing can be
	// learnt from it and gonum cannot represent it.
	ErrEmpty = errs.New("array is empty; expected at least one row and one column", errs.ErrInput)

	// ErrNonFinite marks a matrix that holds NaN or ±Inf.
	ErrNonFinite = errs.New("NaN and Inf values are not allowed; drop or impute those entries first", errs.ErrInput)

	// ErrOutputIsInput marks an output path that would overwrite an input.
	ErrOutputIsInput = errs.New("refusing to overwrite an input file; choose a different output path", errs.ErrInput)
)

// ErrTooLarge marks an array, a model's activations or generated data that
// would take more memory than the budget (see SetMemoryBudget, CheckMemory):
// the input is fine, the machine is too small for it, or the budget too
// tight.
var ErrTooLarge = errs.New("too large for the memory budget; raise it (relurec --max-memory) or ask for less", errs.ErrInput)
