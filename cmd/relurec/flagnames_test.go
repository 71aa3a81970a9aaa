package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/errs"
)

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"Hidden": "hidden", "CertTol": "cert-tol", "MaxWork": "max-work", "XName": "x-name", "Bias": "bias"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

// A library message names its options apart from its text: each is written
// as the flag that sets it, annotated or in kebab case, with its value; an
// option without a flag stays as Go; an error inside a message is written
// as errorText writes it.
func TestFlagTexts(t *testing.T) {
	c := &cobra.Command{Use: "x"}
	c.Flags().Int("hidden", 0, "")
	c.Flags().Bool("force", false, "")
	c.Flags().Float64("gamma-bound", 0, "")
	if err := c.Flags().SetAnnotation("gamma-bound", optionAnnotation, []string{"Gamma"}); err != nil {
		t.Fatal(err)
	}
	opt := func(s, f, v string) errs.Option { return errs.Option{Struct: s, Field: f, Value: v} }
	for _, tc := range []struct {
		msg       errs.Message
		lib, want string
	}{
		{errs.Message{"Y has rank 3 < k = 5; set ", opt("Options", "Hidden", "3")}, "Y has rank 3 < k = 5; set Options.Hidden = 3", "Y has rank 3 < k = 5; set --hidden 3"},
		{errs.Message{"above the limit (", opt("WorstCaseOptions", "Force", ""), ")"}, "above the limit (WorstCaseOptions.Force)", "above the limit (--force)"},
		{errs.Message{"increase γ (", opt("Options", "Gamma", ""), ")"}, "increase γ (Options.Gamma)", "increase γ (--gamma-bound)"},
		{errs.Message{"needs the bias density (", opt("Options", "Bias", ""), ")"}, "needs the bias density (Options.Bias)", "needs the bias density (Options.Bias)"},
		{errs.Message{"skipped (", errs.InvalidOption("Options", "Hidden", "must be ≥ 0, got %d", -1), ")"}, "skipped (bad input: Options.Hidden must be ≥ 0, got -1)", "skipped (bad input: --hidden must be ≥ 0, got -1)"},
	} {
		if got := tc.msg.String(); got != tc.lib {
			t.Errorf("String() = %q, want %q", got, tc.lib)
		}
		if got := flagTexts([]errs.Message{tc.msg}, c); len(got) != 1 || got[0] != tc.want {
			t.Errorf("flagTexts(%q) = %q, want %q", tc.lib, got, tc.want)
		}
	}
}

// An *errs.OptionError names its options apart from its text: each is
// written as the flag that sets it wherever the error sits in the chain,
// under any options struct's name, and the rest of the message is kept.
func TestErrorTextNamesOptionsByFlag(t *testing.T) {
	c := &cobra.Command{Use: "x"}
	c.Flags().Int("hidden", 0, "")
	c.Flags().Float64("gamma-bound", 0, "")
	if err := c.Flags().SetAnnotation("gamma-bound", optionAnnotation, []string{"Gamma"}); err != nil {
		t.Fatal(err)
	}
	oe := errs.Options(errs.ErrInput, "set ", errs.Option{Struct: "Config", Field: "Hidden", Value: "3"},
		" or raise ", errs.Option{Struct: "Options", Field: "Gamma"}, " (", errs.Option{Struct: "Options", Field: "Bias"}, " has no flag)")
	if got, want := oe.Error(), "bad input: set Config.Hidden = 3 or raise Options.Gamma (Options.Bias has no flag)"; got != want {
		t.Errorf("library message %q, want %q", got, want)
	}
	for _, err := range []error{oe, fmt.Errorf("fitting: %w", oe), errors.Join(errors.New("first"), oe)} {
		want := strings.Replace(err.Error(), "set Config.Hidden = 3 or raise Options.Gamma", "set --hidden 3 or raise --gamma-bound", 1)
		if got := errorText(err, c); got != want {
			t.Errorf("errorText(%q) = %q, want %q", err, got, want)
		}
	}
	// A library Validate error turned into a usage error keeps its option.
	v := optionsUsageError(errs.InvalidOption("Options", "Hidden", "must be ≥ 0, got %d", -1))
	if got := errorText(v, c); got != "--hidden must be ≥ 0, got -1" {
		t.Errorf("usage error %q", got)
	}
	if !errors.Is(v, errs.ErrInput) || !errBadInput(v) {
		t.Errorf("usage error %v does not wrap ErrInput", v)
	}
}
