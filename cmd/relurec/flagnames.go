package main

import (
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
// options only; this is where they become flags: an *errs.OptionError keeps
// the options it names apart from its text, and each is written as the flag
// of cmd that sets it (optionFlag).
func errorText(err error, cmd *cobra.Command) string {
	return errs.ErrorText(err, optionNamer(cmd))
}

// flagTexts is a library's messages (a learner's warnings, its notes) for
// the user of cmd, each option written as the flag that sets it.
func flagTexts(ms []errs.Message, cmd *cobra.Command) []string {
	if ms == nil {
		return nil
	}
	name := optionNamer(cmd)
	ss := make([]string, len(ms))
	for i, m := range ms {
		ss[i] = m.Text(name)
	}
	return ss
}

// withFlagTexts replaces each of ms in place by its text for the user of
// cmd (flagTexts), for messages that sit inside a library struct the
// command writes whole (a learner's diagnostics).
func withFlagTexts(ms []errs.Message, cmd *cobra.Command) {
	for i, s := range flagTexts(ms, cmd) {
		ms[i] = errs.Message{s}
	}
}

// optionNamer names options as the flags of cmd that set them
// (optionFlag), or as Go without cmd.
func optionNamer(cmd *cobra.Command) func(errs.Option) string {
	if cmd == nil {
		return errs.Option.String
	}
	return func(o errs.Option) string { return optionFlag(cmd, o) }
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
