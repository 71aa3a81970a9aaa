package depth2

import "github.com/relurec/relurec/errs"

// ErrInput marks errors caused by the caller's data or options: wrong
// shapes, NaN or Inf, too few samples for the moment order the route needs,
// an order or width the route cannot identify. The CLI maps it to exit
// code 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput

// ErrNoUnits is returned when the moment tensors show no hidden unit above
// the noise (every singular value of both flattenings under the rank
// threshold): too few samples, or units whose biases are so large that
// their nonlinear part is invisible (outside the good set G of [ATV21,
// Theorem D.1]).
var ErrNoUnits = errs.New("no hidden unit found above the noise", nil)

// ErrNotExact is returned by Fit with Route "exact" when the refined network
// does not reproduce the data to the certificate's tolerance.
var ErrNotExact = errs.ErrNotExact
