package main

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/relurec/relurec/errs"
)

// optionAnnotation is the pflag annotation that names the library option
// field a flag sets when the flag's name is not the field's kebab case.
const optionAnnotation = "relurec-option"

// errorText is err's message for the user of cmd. Library messages speak of
// options only; this is where they become flags. An *errs.OptionError keeps
// the options it names apart from its text, and each is written as the flag
// of cmd that sets it (flagForOption); a message that is only text goes
// through withFlagNames.
func errorText(err error, cmd *cobra.Command) string {
	msg := err.Error()
	if cmd != nil {
		for _, oe := range optionErrors(err) {
			msg = strings.Replace(msg, oe.Message(errs.Option.String), oe.Message(func(o errs.Option) string { return optionFlag(cmd, o) }), 1)
		}
	}
	return withFlagNames(msg, cmd)
}

// optionFlag writes o as the flag of cmd that sets it, with its value
// ("--hidden 3"), or as the library does when cmd has no such flag.
func optionFlag(cmd *cobra.Command, o errs.Option) string {
	flag := flagForOption(cmd, o.Field)
	switch {
	case flag == "":
		return o.String()
	case o.Value != "":
		return "--" + flag + " " + o.Value
	}
	return "--" + flag
}

// optionErrors lists the *errs.OptionError values in err's chain.
func optionErrors(err error) []*errs.OptionError {
	var found []*errs.OptionError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if oe, ok := err.(*errs.OptionError); ok {
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

// optionRef matches a library message's reference to an option field:
// "Options.Hidden", "WorstCaseOptions.Force", optionally followed by " = "
// and a value ("set Options.Hidden = 4").
var optionRef = regexp.MustCompile(`\b[A-Z]?\w*Options\.([A-Z]\w*)( = )?`)

// withFlagNames rewrites the option fields a library message given as text
// names (a learner's warnings and notes are strings, and so are the errors
// not yet made with errs.Options) into the flags of cmd that set them, so a
// user of the CLI reads "--hidden 4" where a library caller reads
// "Options.Hidden = 4". A field without a flag on cmd is left as it is.
func withFlagNames(msg string, cmd *cobra.Command) string {
	if cmd == nil {
		return msg
	}
	return optionRef.ReplaceAllStringFunc(msg, func(ref string) string {
		m := optionRef.FindStringSubmatch(ref)
		flag := flagForOption(cmd, m[1])
		if flag == "" {
			return ref
		}
		if m[2] != "" {
			return "--" + flag + " "
		}
		return "--" + flag
	})
}

// flagForOption returns the name of cmd's flag that sets the option field
// field: the flag annotated with it, else the flag named field in kebab case.
func flagForOption(cmd *cobra.Command, field string) string {
	found := ""
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		for _, v := range f.Annotations[optionAnnotation] {
			if v == field {
				found = f.Name
			}
		}
	})
	if found != "" {
		return found
	}
	if f := cmd.Flags().Lookup(kebab(field)); f != nil {
		return f.Name
	}
	return ""
}

// kebab turns a Go field name into a flag name: CertTol → cert-tol,
// MaxWork → max-work, XName → x-name.
func kebab(field string) string {
	var b strings.Builder
	rs := []rune(field)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				b.WriteByte('-')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
