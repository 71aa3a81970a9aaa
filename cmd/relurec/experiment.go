package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/experiment"
)

func newExperimentCmd(a *app) *cobra.Command {
	return groupCmd("experiment", "List and run the registered experiments that reproduce the papers' claims",
		`  relurec experiment list
  relurec experiment run twolayer-samples --quick --out /tmp/tl`,
		newExperimentListCmd(a), newExperimentRunCmd(a))
}

func newExperimentListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered experiments",
		Example: `  relurec experiment list
  relurec experiment list --json`,
		Args: cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			type item struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			}
			var items []item
			for _, e := range experiment.List() {
				items = append(items, item{e.Name, e.Description})
			}
			return a.emit(map[string]any{"experiments": items}, func(w io.Writer) {
				for _, it := range items {
					fmt.Fprintf(w, "%s\n    %s\n", it.Name, it.Description)
				}
			})
		}),
	}
}

type experimentRunResult struct {
	Command    string             `json:"command"`
	Experiment string             `json:"experiment"`
	Reproduce  string             `json:"reproduce"`
	OutDir     string             `json:"out_dir"`
	Files      []string           `json:"files"`
	Seconds    float64            `json:"seconds"`
	Report     *experiment.Report `json:"report"`
}

func newExperimentRunCmd(a *app) *cobra.Command {
	var cfg experiment.Config
	c := &cobra.Command{
		Use:   "run NAME",
		Short: "Run an experiment and write results.json, table.md and plot.png",
		Long: `Run a registered experiment (see "relurec experiment list") and write into
--out (default results/NAME):

  results.json  every run, the configuration and the environment (Go version,
                CPUs, date, relurec version)
  table.md      the summary table, with the command that reproduces it
  plot.png      the main figure
  *.png         further figures of some experiments (compress-fashion and
                compress-allocation: agreement.png, logit-error.png)

Every random choice derives from --seed, so the same flags reproduce the same
numbers (timings vary with the machine). --quick runs a short grid with 2
seeds, for a check in well under a minute.`,
		Example: `  # The full two-layer sample-complexity experiment (5 seeds, n up to 1e6; minutes)
  relurec experiment run twolayer-samples --out results/twolayer-samples

  # A quick check
  relurec experiment run twolayer-samples --quick --out /tmp/tl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("experiment run takes exactly one experiment name (known: %s)", experiment.Names())
			}
			return nil
		},
		RunE: a.leaf(func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			name := args[0]
			if _, ok := experiment.Get(name); !ok {
				return usageErrorf("unknown experiment %q (known: %s)", name, experiment.Names())
			}
			if cfg.Seeds < 0 {
				return usageErrorf("--seeds must be ≥ 0, got %d", cfg.Seeds)
			}
			if cfg.OutDir == "" {
				cfg.OutDir = filepath.Join("results", name)
			}
			cfg.Version = relurecVersion()
			progress, clear := a.progress()
			cfg.Progress = progress
			rep, files, err := experiment.RunAndWrite(cmd.Context(), name, cfg)
			clear()
			if err != nil {
				return err
			}
			res := experimentRunResult{
				Command: "experiment run", Experiment: name, Reproduce: experiment.CommandLine(name, cfg),
				OutDir: cfg.OutDir, Files: files, Seconds: time.Since(start).Seconds(), Report: rep,
			}
			return a.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "%s\n\n", rep.Title)
				fmt.Fprint(w, experiment.MarkdownTable(rep.Columns, rep.Rows))
				for _, t := range rep.Tables {
					fmt.Fprintf(w, "\n%s\n\n%s", t.Title, experiment.MarkdownTable(t.Columns, t.Rows))
				}
				for _, n := range rep.Notes {
					fmt.Fprintf(w, "\n- %s", n)
				}
				fmt.Fprintf(w, "\n\nwrote %v in %.1f s\n", files, res.Seconds)
			})
		}),
	}
	f := c.Flags()
	f.StringVar(&cfg.OutDir, "out", "", "output directory (default results/NAME)")
	f.IntVar(&cfg.Seeds, "seeds", 0, "number of seeds (0 = the experiment's default, e.g. 5, or 2 with --quick; compress-fashion: 1 trained model)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "first seed; repetition i uses seed+i")
	f.BoolVar(&cfg.Quick, "quick", false, "short grid and 2 seeds")
	return c
}
