package depth2

import "errors"

// ErrInput marks errors caused by the caller's data or options: wrong
// shapes, NaN or Inf, too few samples for the moment order the route needs,
// an order or width the route cannot identify. The CLI maps it to exit
// code 2.
var ErrInput = errors.New("bad input")

// ErrNoUnits is returned when the moment tensors show no hidden unit above
// the noise (every singular value of both flattenings under the rank
// threshold): too few samples, or units whose biases are so large that
// their nonlinear part is invisible (specs/004 §1, the set G).
var ErrNoUnits = errors.New("no hidden unit found above the noise")

// ErrNotExact is returned by Fit with Route "exact" when the refined network
// does not reproduce the data to the certificate's tolerance.
var ErrNotExact = errors.New("no certified exact solution")
