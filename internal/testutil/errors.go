package testutil

import (
	"errors"
	"strings"
	"testing"

	"github.com/relurec/relurec/errs"
)

// WantInputError fails t unless err wraps errs.ErrInput and its message
// contains want; name says which check it is.
func WantInputError(t testing.TB, name string, err error, want string) {
	t.Helper()
	if !errors.Is(err, errs.ErrInput) {
		t.Errorf("%s: got %v, want an error wrapping ErrInput", name, err)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: message %q does not say %q", name, err, want)
	}
}
