package twolayer

import "errors"

// ErrInput marks errors caused by the caller's data or options (wrong shapes,
// NaN, too few samples, a hidden width the route cannot identify). The CLI
// maps it to exit code 2.
var ErrInput = errors.New("bad input")

// ErrNotExact is returned by Fit with Route "exact" when no exact network
// reproducing the data was found and certified.
var ErrNotExact = errors.New("no certified exact solution")
