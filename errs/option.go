package errs

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Option names a field of a library's options struct in a message: Struct
// "Options" and Field "Hidden", and Value when the message tells the
// caller what to set it to. A library caller reads it as Go, "Options.Hidden"
// or "Options.Hidden = 3"; a command line reads the flag that sets the field
// instead, "--hidden 3" (Message.Text with its own namer).
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

// Message is a library message whose text may name options: its parts are
// strings, Options, nested Messages and errors (which may hold
// OptionErrors), kept apart so that each reader names
// the options its own way — String as Go ("Options.Refine"), the CLI as the
// flag that sets it ("--refine"). Warnings and notes that name an option are
// Messages, and so is an OptionError's text. Its JSON is its String.
type Message []any

// Textf is the Message of formatted text that names no option.
func Textf(format string, args ...any) Message {
	return Message{fmt.Sprintf(format, args...)}
}

// Texts is each of ss as a Message: a list of plain warnings joining one
// that holds Messages.
func Texts(ss []string) []Message {
	if ss == nil {
		return nil
	}
	ms := make([]Message, len(ss))
	for i, s := range ss {
		ms[i] = Message{s}
	}
	return ms
}

// Text writes m with each Option written by name, and each error part as
// ErrorText does.
func (m Message) Text(name func(Option) string) string {
	var b strings.Builder
	for _, p := range m {
		switch p := p.(type) {
		case Option:
			b.WriteString(name(p))
		case Message:
			b.WriteString(p.Text(name))
		case string:
			b.WriteString(p)
		case error:
			b.WriteString(ErrorText(p, name))
		}
	}
	return b.String()
}

// String is m as a library caller reads it, each Option written as Go.
func (m Message) String() string { return m.Text(Option.String) }

// MarshalJSON writes m as the JSON string of its String.
func (m Message) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON reads a JSON string as a Message of that text.
func (m *Message) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*m = Message{s}
	return nil
}

// Strings is ms as a library caller reads them (String of each).
func Strings(ms []Message) []string {
	if ms == nil {
		return nil
	}
	ss := make([]string, len(ms))
	for i, m := range ms {
		ss[i] = m.String()
	}
	return ss
}

// OptionError is an error whose message names options: its parts are
// strings and Options, kept apart so that each reader names the options its
// own way. It wraps Kind (ErrInput for a wrong or missing option), and
// Error reads like fmt.Errorf("%w: …", Kind). With a nil Kind, Error is the
// message alone: a message that ends with its sentinel wraps the
// OptionError itself, fmt.Errorf("%w: %w", errs.Options(nil, …), ErrInput).
type OptionError struct {
	Kind  error
	Parts Message
}

// ErrorText is err's message with the options named by each *OptionError in
// its chain written by name: ErrorText(err, Option.String) is err.Error().
func ErrorText(err error, name func(Option) string) string {
	msg := err.Error()
	for _, oe := range optionErrors(err) {
		msg = strings.Replace(msg, oe.Message(Option.String), oe.Message(name), 1)
	}
	return msg
}

// optionErrors lists the *OptionError values in err's chain.
func optionErrors(err error) []*OptionError {
	var found []*OptionError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if oe, ok := err.(*OptionError); ok {
			found = append(found, oe)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return found
}

// Options returns an *OptionError of kind with the message parts, each a
// string, an Option or a Message: Options(ErrInput, Option{"Options",
// "Hidden", ""}, " must be ≥ 0, got -1").
func Options(kind error, parts ...any) error {
	return &OptionError{Kind: kind, Parts: parts}
}

// Message is the message without its kind, each Option written by name.
func (e *OptionError) Message(name func(Option) string) string {
	return e.Parts.Text(name)
}

func (e *OptionError) Error() string {
	if e.Kind == nil {
		return e.Parts.String()
	}
	return e.Kind.Error() + ": " + e.Parts.String()
}

func (e *OptionError) Unwrap() error { return e.Kind }

// InvalidOption returns an *OptionError of kind ErrInput about one field of
// the options struct named structName: the field, then the formatted text —
// InvalidOption("Options", "Hidden", "must be ≥ 0, got %d", -1) reads
// "bad input: Options.Hidden must be ≥ 0, got -1".
func InvalidOption(structName, field, format string, args ...any) error {
	return Options(ErrInput, Option{Struct: structName, Field: field}, " "+fmt.Sprintf(format, args...))
}
