package twolayer

import "github.com/relurec/relurec/errs"

// ErrInput marks errors caused by the caller's data or options (wrong shapes,
// NaN, too few samples, a hidden width the route cannot identify). The CLI
// maps it to exit code 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput

// ErrNotExact is returned by Fit with Route "exact" when no exact network
// reproducing the data was found and certified.
var ErrNotExact = errs.ErrNotExact
