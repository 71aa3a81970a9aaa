// Package errs is relurec's one error vocabulary. Every package marks an
// error caused by the caller's data or options with ErrInput, a result that
// could not be certified exact with ErrNotExact, and an iteration limit met
// before the tolerance with ErrNotConverged, so callers — the CLI maps
// ErrInput to exit status 2 — test one value with errors.Is whatever package
// the error came from.
//
// A package that wants its own, more specific sentinel (dataio.ErrFormat,
// linalg.ErrShape) makes it with New and a kind: errors.Is then matches both
// the specific sentinel and its kind, and the message stays the package's own.
package errs

import (
	"errors"
	"fmt"
)

var (
	// ErrInput marks errors caused by the caller's data or options: wrong
	// shapes, NaN or Inf, too few samples, a width the data cannot support,
	// an unreadable file, an unknown option value.
	ErrInput = errors.New("bad input")
	// ErrNotExact marks a route that claims exact recovery but found no
	// network meeting its residual certificate.
	ErrNotExact = errors.New("no certified exact solution")
	// ErrNotConverged marks an iterative solver stopped at its iteration
	// limit before meeting its tolerance.
	ErrNotConverged = errors.New("iterative solver did not converge")
)

// New returns a sentinel error with message msg that also matches kind
// (ErrInput, ErrNotExact, ErrNotConverged, or another sentinel) under
// errors.Is. Its message is msg alone. A nil kind marks a failure that is not
// the caller's fault (a factorisation that broke down, an internal shape
// mismatch): the CLI reports it with exit status 1.
func New(msg string, kind error) error {
	return &sentinel{msg: msg, kind: kind}
}

type sentinel struct {
	msg  string
	kind error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.kind }

// Inputf formats an error that wraps ErrInput: "bad input: " followed by the
// formatted message, as fmt.Errorf("%w: "+format, ErrInput, args...) would.
func Inputf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInput}, args...)...)
}
