package errs

import (
	"fmt"
	"strings"
)

// Option names a field of a library's options struct in a message: Struct
// "Options" and Field "Hidden", and Value when the message tells the
// caller what to set it to. A library caller reads it as Go, "Options.Hidden"
// or "Options.Hidden = 3"; a command line reads the flag that sets the field
// instead, "--hidden 3" (OptionError.Message with its own namer).
type Option struct {
	Struct, Field string
	Value         string
}

// String is the option as a library caller writes it.
func (o Option) String() string {
	s := o.Struct + "." + o.Field
	if o.Value != "" {
		s += " = " + o.Value
	}
	return s
}

// OptionError is an error whose message names options: its parts are
// strings and Options, kept apart so that each reader names the options its
// own way. It wraps Kind (ErrInput for a wrong or missing option), and
// Error reads like fmt.Errorf("%w: …", Kind).
type OptionError struct {
	Kind  error
	Parts []any // string or Option
}

// Options returns an *OptionError of kind with the message parts, each a
// string or an Option: Options(ErrInput, Option{"Options", "Hidden", ""},
// " must be ≥ 0, got -1").
func Options(kind error, parts ...any) error {
	return &OptionError{Kind: kind, Parts: parts}
}

// Message is the message without its kind, each Option written by name.
func (e *OptionError) Message(name func(Option) string) string {
	var b strings.Builder
	for _, p := range e.Parts {
		switch p := p.(type) {
		case Option:
			b.WriteString(name(p))
		case string:
			b.WriteString(p)
		}
	}
	return b.String()
}

func (e *OptionError) Error() string {
	return e.Kind.Error() + ": " + e.Message(Option.String)
}

func (e *OptionError) Unwrap() error { return e.Kind }

// InvalidOption returns an *OptionError of kind ErrInput about one field of
// the options struct named structName: the field, then the formatted text —
// InvalidOption("Options", "Hidden", "must be ≥ 0, got %d", -1) reads
// "bad input: Options.Hidden must be ≥ 0, got -1".
func InvalidOption(structName, field, format string, args ...any) error {
	return Options(ErrInput, Option{Struct: structName, Field: field}, " "+fmt.Sprintf(format, args...))
}
