package robust

import "errors"

// ErrInput marks errors caused by the caller's data or options: wrong
// shapes, NaN/Inf, d ≤ k, a rank-deficient A, an unknown rule or solver, a
// rule whose inputs are missing. The CLI maps it to exit code 2.
var ErrInput = errors.New("bad input")
