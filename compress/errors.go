package compress

import "github.com/relurec/relurec/errs"

// ErrInput marks errors caused by the caller's network, data or options:
// shapes that do not chain, calibration data of the wrong width, NaN or Inf,
// a budget outside (0, 1], an unknown method. The CLI maps it to exit
// status 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput

// ErrNotConverged marks an iterative estimator (Alg 4's projection, Alg 5's
// accelerated gradient) that stopped at its iteration limit before meeting
// its tolerance. The partial result is returned with it so callers can
// decide; the driver turns it into a warning.
var ErrNotConverged = errs.ErrNotConverged
