package main

import (
	"testing"

	"github.com/spf13/cobra"
)

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"Hidden": "hidden", "CertTol": "cert-tol", "MaxWork": "max-work", "XName": "x-name", "Bias": "bias"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithFlagNames(t *testing.T) {
	c := &cobra.Command{Use: "x"}
	c.Flags().Int("hidden", 0, "")
	c.Flags().Bool("force", false, "")
	c.Flags().Float64("gamma-bound", 0, "")
	if err := c.Flags().SetAnnotation("gamma-bound", optionAnnotation, []string{"Gamma"}); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"bad input: Y has rank 3 < k = 5; set Options.Hidden = 3": "bad input: Y has rank 3 < k = 5; set --hidden 3",
		"above the limit (WorstCaseOptions.Force)":                "above the limit (--force)",
		"increase γ (Options.Gamma)":                              "increase γ (--gamma-bound)",
		"needs the bias density (Options.Bias)":                   "needs the bias density (Options.Bias)",
	} {
		if got := withFlagNames(in, c); got != want {
			t.Errorf("withFlagNames(%q) = %q, want %q", in, got, want)
		}
	}
}
