package generative

import "github.com/relurec/relurec/errs"

// ErrInput marks errors caused by the caller's data or options: wrong
// shapes, NaN/Inf or negative entries in Y, a rank outside [1, min(n, d)),
// unknown options, an invalid bias density. The CLI maps it to exit code 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput

// ErrInfeasible marks a maximum-likelihood program with an empty feasible
// set: γ (the bound on ‖M‖_∞) is too small for some row of the data.
// errors.Is(err, ErrInput) also holds, because the fix is a larger γ.
var ErrInfeasible error = infeasibleError{}

type infeasibleError struct{}

func (infeasibleError) Error() string        { return "infeasible: γ is too small for the data" }
func (infeasibleError) Is(target error) bool { return target == ErrInput }
