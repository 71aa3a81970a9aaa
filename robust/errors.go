package robust

import "github.com/relurec/relurec/errs"

// ErrInput marks errors caused by the caller's data or options: wrong
// shapes, NaN/Inf, d ≤ k, a rank-deficient A, an unknown rule or solver, a
// rule whose inputs are missing. The CLI maps it to exit code 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput
