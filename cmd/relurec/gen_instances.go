package main

import (
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/synth"
)

// Special instances of `gen twolayer --instance`: the lower-bound pair of
// Bakshi et al. Lemma 16 and the NP-hardness reduction of their Thm 2
// ([BJW19, Lemma 16, Thm 2]). They fix d, k and m themselves.

// instanceGen holds the --instance flags.
type instanceGen struct {
	Instance      string  `json:"instance,omitempty"`
	A             float64 `json:"a,omitempty"`
	Second        bool    `json:"second,omitempty"`
	Vars          int     `json:"vars,omitempty"`
	Clauses       int     `json:"clause_pairs,omitempty"`
	VariableAlpha bool    `json:"variable_alpha,omitempty"`
}

// The values of gen twolayer --instance.
const (
	instanceRandom  = "random"  // a random teacher (the default)
	instanceLemma16 = "lemma16" // the κ lower-bound pair of [BJW19, Lemma 16]
	instanceSAT6    = "sat6"    // the NP-hardness reduction of [BJW19, Thm 2]
)

func (ig *instanceGen) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&ig.Instance, "instance", ig.Instance, "special instance instead of a random teacher: lemma16 (the κ lower-bound pair of Lemma 16) or sat6 (the NP-hardness reduction of Thm 2)")
	f.Float64Var(&ig.A, "a", ig.A, "lemma16: the parameter a in (0, 1]; κ(V) = 1/a")
	f.BoolVar(&ig.Second, "second", ig.Second, "lemma16: draw Y from the second network of the pair (2a instead of a)")
	f.IntVar(&ig.Vars, "vars", ig.Vars, "sat6: number of Boolean variables (≥ 6); X has vars+2 columns")
	f.IntVar(&ig.Clauses, "clauses", ig.Clauses, "sat6: number of planted clause pairs (each clause and its complement)")
	f.BoolVar(&ig.VariableAlpha, "variable-alpha", ig.VariableAlpha, "sat6: the variant where the output weights are unknown too (one more column, two more rows)")
}

// active reports whether a special instance (not the random teacher) was asked for.
func (ig *instanceGen) active() bool {
	return ig != nil && (ig.Instance == instanceLemma16 || ig.Instance == instanceSAT6)
}

// lemma16Flags, sat6Flags and randomFlags are the flags that only apply to some instance; randomOnly
// apply to one kind of instance only.
var (
	lemma16Flags = []string{"a", "second"}
	sat6Flags    = []string{"vars", "clauses", "variable-alpha"}
	randomFlags  = []string{"d", "k", "m", "cond-v", "cond-u", "cov-cond", "noise", "noise-kind"}
)

// validate checks the --instance flags against the other flags the user set.
func (ig *instanceGen) validate(c *cobra.Command) error {
	reject := func(names []string, why string) error {
		for _, n := range names {
			if c.Flags().Changed(n) {
				return usageErrorf("--%s does not apply %s", n, why)
			}
		}
		return nil
	}
	switch ig.Instance {
	case "", instanceRandom:
		if err := reject(append(append([]string{}, lemma16Flags...), sat6Flags...), "without --instance"); err != nil {
			return err
		}
	case instanceLemma16:
		if err := reject(append(append([]string{}, randomFlags...), sat6Flags...), "to --instance lemma16 (d = 2, k = 2, m = 1, noiseless)"); err != nil {
			return err
		}
		if math.IsNaN(ig.A) || ig.A <= 0 || ig.A > 1 || math.IsInf(1/ig.A, 0) {
			return usageErrorf("--a must be in (0, 1] with κ = 1/a finite (a ≥ %.3g), got %g", 1/math.MaxFloat64, ig.A)
		}
		ig.Vars, ig.Clauses, ig.VariableAlpha = 0, 0, false // not used: keep them out of the manifest
	case instanceSAT6:
		if err := reject(append(append([]string{"n"}, randomFlags...), lemma16Flags...), "to --instance sat6 (the formula fixes n, d = vars+2, k = 2, m = 1)"); err != nil {
			return err
		}
		if ig.Vars < 6 || ig.Vars > 1_000_000_000 {
			return usageErrorf("--vars must be between 6 (clauses have six distinct variables) and 1e9, got %d", ig.Vars)
		}
		if ig.Clauses < 1 || ig.Clauses > 1_000_000 {
			return usageErrorf("--clauses must be between 1 and 1e6, got %d", ig.Clauses)
		}
		ig.A, ig.Second = 0, false
	default:
		return usageErrorf("--instance must be random, lemma16 or sat6, got %q", ig.Instance)
	}
	return nil
}

// satPairBytes is what a clause pair of --instance sat6 costs besides its
// rows of X: the two clauses and their record in the manifest and --json
// (measured: 1.2 kB a pair, 1.7 kB with --json).
const satPairBytes = 2000

// checkMemory refuses, before anything is drawn, an instance whose arrays
// would not fit the memory budget: lemma16 has n × 2 inputs and one
// output; sat6 has a row of X per clause and per forcing point and a column
// per variable (synth.SATReductionShape), and the formula.
func (ig *instanceGen) checkMemory(n int) error {
	var mem genMemory
	if ig.Instance == instanceLemma16 {
		mem.samples(n, 2, 2, 1)
		return mem.check("use a smaller --n")
	}
	rows, cols := synth.SATReductionShape(ig.Vars, 2*ig.Clauses, ig.VariableAlpha)
	mem.samples(rows, cols, 2, 1)
	mem.add(satPairBytes*float64(ig.Clauses), fmt.Sprintf("the formula (%d clause pairs)", ig.Clauses))
	return mem.check("use fewer --vars or --clauses")
}

// generate draws the instance and fills g's shape fields with the instance's
// actual d, k, m and n. The extra map goes into the manifest and --json.
func (ig *instanceGen) generate(g *twoLayerGen) (*generated, map[string]any, error) {
	switch ig.Instance {
	case instanceLemma16:
		p, err := synth.DrawLemma16Problem(ig.A, ig.Second, g.N, g.Seed)
		if err != nil {
			return nil, nil, err
		}
		g.D, g.K, g.M = 2, 2, 1
		return &generated{teacher: p.Teacher, x: p.X, y: p.Y}, map[string]any{
			"network_a":              p.A,
			"cond_v":                 1 / p.A,
			"distinguishing_samples": p.Distinguishing,
			"distinguish_prob":       synth.Lemma16DistinguishProb(ig.A),
		}, nil
	case instanceSAT6:
		p, err := synth.DrawSAT6Problem(ig.Vars, ig.Clauses, ig.VariableAlpha, g.Seed)
		if err != nil {
			return nil, nil, err
		}
		g.N, g.D = p.X.Dims()
		g.K, g.M = 2, 1
		return &generated{teacher: p.Teacher, x: p.X, y: p.Y}, map[string]any{
			"clause_rows": p.Instance.NumP,
			"clauses":     p.Formula.Clauses,
			"planted":     p.Planted,
		}, nil
	}
	return nil, nil, fmt.Errorf("unknown instance %q", ig.Instance)
}
