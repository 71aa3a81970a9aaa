package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/blasbackend"
	"github.com/relurec/relurec/nn"
)

// app is the state shared by the commands of one invocation.
type app struct {
	stdout, stderr io.Writer
	args           []string // the command line, for manifests

	jsonOut   bool   // --json
	quiet     bool   // --quiet
	maxMemory string // --max-memory

	// started is set when a command's RunE begins; an error before that is
	// a usage error from cobra's parsing.
	started bool
	// ctx is the running command's context (cancelled by Ctrl-C), set with
	// started; the shared read and write steps use it.
	ctx context.Context
	// staged holds the outputs written so far (writeAll), renamed into
	// place only when the command has succeeded and printed its report.
	staged staged
	// cmd is the running command, set with started.
	cmd *cobra.Command
}

// context returns the running command's context.
func (a *app) context() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	return a.ctx
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "relurec",
		Short: "Learn the exact weights of ReLU networks from samples",
		Long: `relurec learns the weights of ReLU networks from input/output samples with
provable algorithms. For a two-layer network Y = ReLU(X·Vᵀ)·Uᵀ with Gaussian
inputs it recovers V and U exactly (up to the order and positive scale of the
hidden units) from noiseless samples, and approximately from noisy ones
(Bakshi, Jayaram, Woodruff: "Learning two layer rectified neural networks in
polynomial time").

Samples are rows: X is n×d, Y is n×m, as in numpy and PyTorch. Data files are
.npy, .npz or .csv; models are safetensors with PyTorch nn.Sequential keys,
or ONNX (.onnx).

Exit status: 0 success, 2 bad input (usage, unreadable or malformed files,
wrong shapes, NaN/Inf, sizes beyond --max-memory), 3 answer not certified
(learn, extract, demo: nothing written unless --approximate), 1 any other
failure, 130
interrupted by Ctrl-C (SIGINT), 143 by SIGTERM (128 + the signal's number).`,
		Example: `  # See it work on a synthetic network in a few seconds
  relurec demo

  # Generate data, learn the network back, and compare with the truth
  relurec gen twolayer --d 20 --k 5 --m 8 --n 100000 --seed 1 --out data.npz --model-out teacher.safetensors
  relurec learn twolayer --data data.npz --hidden 5 --out model.safetensors
  relurec eval --model model.safetensors --truth teacher.safetensors --data data.npz`,
		Version:       relurecVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			return cmd.Help()
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	// The BLAS backend decides the speed (and the last bits) of every
	// factorisation, so --version names it: benchmarks read it from there.
	root.SetVersionTemplate("relurec version {{.Version}} (BLAS: " + blasbackend.Name() + ")\n")
	pf := root.PersistentFlags()
	pf.BoolVar(&a.jsonOut, "json", false, "print the result as one JSON object on stdout (and nothing else there)")
	pf.BoolVar(&a.quiet, "quiet", false, "no progress bars or notes on stderr")
	pf.StringVar(&a.maxMemory, "max-memory", "", "memory budget, e.g. 8GB or 512MiB, for the arrays read or generated, a network's training and a model's activations; a run that would need more exits 2 before allocating it (default: half the machine's memory)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v", err)
	})
	root.AddCommand(newDemoCmd(a), newGenCmd(a), newLearnCmd(a), newExtractCmd(a), newEvalCmd(a), newExperimentCmd(a))
	root.AddCommand(newTrainCmd(a), newCompressCmd(a))
	root.AddCommand(newRecoverCmd(a))
	return root
}

// relurecVersion is the module version from the build information when the
// binary was built from a tagged module (go install …@v1.2.3), else version.
func relurecVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
	}
	return version
}

// groupCmd returns a command that only groups subcommands: run without one
// (or with an unknown one) it is a usage error.
func groupCmd(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			if len(args) == 0 {
				return usageErrorf("%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", "))
			}
			return usageErrorf("unknown subcommand %q for %s (available: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
		},
	}
	c.AddCommand(subs...)
	return c
}

// leaf wraps a command's work: it marks that parsing succeeded, and once the
// work has returned without error (its result printed) commits the outputs
// it staged; otherwise it removes them.
func (a *app) leaf(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.started = true
		a.ctx, a.cmd = cmd.Context(), cmd
		budget := int64(0) // the default
		if a.maxMemory != "" {
			b, err := dataio.ParseBytes(a.maxMemory)
			if err != nil {
				return usageErrorf("--max-memory: %v", err)
			}
			budget = b
		}
		dataio.SetMemoryBudget(budget)
		// read may lower the collector's soft memory limit for this
		// command's data (limitHeapToData); the next command starts afresh.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
		limitHeapToBudget()
		// Outputs not committed (an error, a panic) are removed.
		defer a.staged.discard()
		if err := fn(cmd, args); err != nil {
			if errors.As(err, new(keptOutputs)) {
				if cerr := a.staged.commit(a.context()); cerr != nil {
					return cerr
				}
			}
			return err
		}
		return a.staged.commit(a.context())
	}
}

// dataFlags are the flags that name a data set: --x/--y or --data.
type dataFlags struct {
	x, y, data   string
	xName, yName string
}

func (d *dataFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&d.x, "x", "", "inputs X, n×d (.npy, .csv, or .npz with --x-name)")
	f.StringVar(&d.y, "y", "", "outputs Y, n×m (.npy, .csv, or .npz with --y-name)")
	f.StringVar(&d.data, "data", "", "one .npz holding both X and Y (instead of --x and --y)")
	f.StringVar(&d.xName, "x-name", "X", "name of the X array inside an .npz")
	f.StringVar(&d.yName, "y-name", "Y", "name of the Y array inside an .npz")
}

// given reports whether any data flag was set.
func (d *dataFlags) given() bool { return d.x != "" || d.y != "" || d.data != "" }

// validate checks that the flags name exactly one data set.
func (d *dataFlags) validate() error {
	switch {
	case d.data != "" && (d.x != "" || d.y != ""):
		return usageErrorf("give either --data or --x and --y, not both")
	case d.data == "" && d.x == "" && d.y == "":
		return usageErrorf("no data given: use --data DATA.npz or --x X.npy --y Y.npy")
	case d.data == "" && (d.x == "" || d.y == ""):
		return usageErrorf("--x and --y go together: give both (or --data for one .npz)")
	}
	return nil
}

// paths returns the input files.
func (d *dataFlags) paths() []string {
	if d.data != "" {
		return []string{d.data}
	}
	return []string{d.x, d.y}
}

// read loads X and Y and checks that they are finite and have matching rows.
func (d *dataFlags) read(ctx context.Context) (x, y *mat.Dense, err error) {
	xp, yp := d.x, d.y
	if d.data != "" {
		xp, yp = d.data, d.data
	}
	if x, err = readInput(ctx, "X", xp, d.xName); err != nil {
		return nil, nil, arrayNameHint(err, "--x-name", "--y-name")
	}
	if y, err = readInput(ctx, "Y", yp, d.yName); err != nil {
		return nil, nil, arrayNameHint(err, "--y-name", "--x-name")
	}
	nx, _ := x.Dims()
	ny, _ := y.Dims()
	if nx != ny {
		return nil, nil, inputErrorf("X has %d rows but Y has %d: samples are rows, so they must match", nx, ny)
	}
	limitHeapToData(x, y)
	return x, y, nil
}

// limitHeapToBudget sets the collector's soft memory limit to twice the
// memory budget, unless GOMEMLIMIT is set or a lower limit is in force.
// Every allocation is checked against the budget, but the collector's
// default pacing lets the heap grow to twice what is live before it
// collects, garbage included; under the limit it collects sooner, so a run
// whose live data fit the budget stays within twice it.
func limitHeapToBudget() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit := 2 * dataio.MemoryBudget(); limit < debug.SetMemoryLimit(-1) {
		debug.SetMemoryLimit(limit)
	}
}

// arrayNameHint adds to an .npz's missing-array error the flag that names
// the array (flag), and the other array's (other).
func arrayNameHint(err error, flag, other string) error {
	if !errors.Is(err, dataio.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%w: %s NAME (and %s for the other array)", err, flag, other)
}

// limitHeapToData sets the collector's soft memory limit to the data's
// size plus a quarter (at least 64 MiB more), unless GOMEMLIMIT is set or
// a lower limit is in force. Once X and Y are read they are nearly all of
// the heap, and the collector's default pacing (collect when the heap has
// doubled since the last collection) would let the learners' short-lived
// n×k buffers pile up to the size of the data again before a collection:
// 1.15 GB for 560 MB of data, with ~0.7 GB live. Under the limit it
// collects before that. The data hold no pointers, so a collection marks
// almost nothing and costs milliseconds (n=1e6, d=50, m=20: +0.5 s of an
// 11 s fit, peak RSS 1.15 GB → see docs/files.md). A learner whose live
// buffers exceed the limit still runs: the runtime caps the collector at
// about half the CPU and lets the heap grow.
func limitHeapToData(ms ...*mat.Dense) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var data int64
	for _, m := range ms {
		r, c := m.Dims()
		data += int64(r) * int64(c) * 8
	}
	limit := data + max(data/4, 64<<20)
	if limit < debug.SetMemoryLimit(-1) {
		debug.SetMemoryLimit(limit)
	}
}

// twoLayerShape returns (d, k, m) of a bias-free two-layer ReLU network, or a
// bad-input error naming what is wrong.
func twoLayerShape(name string, m *nn.MLP) (d, k, o int, err error) {
	if m == nil || len(m.Layers) != 2 {
		n := 0
		if m != nil {
			n = len(m.Layers)
		}
		return 0, 0, 0, inputErrorf("%s has %d layers; expected a two-layer network Linear → ReLU → Linear", name, n)
	}
	l0, l1 := m.Layers[0], m.Layers[1]
	if !l0.Act.Rectified() || l1.Act != nn.Identity {
		return 0, 0, 0, inputErrorf("%s has activations %s, %s; expected relu (or relupow<c>, reluexp) then identity", name, l0.Act, l1.Act)
	}
	if l0.Bias != nil || l1.Bias != nil {
		return 0, 0, 0, inputErrorf("%s has biases; two-layer recovery handles bias-free networks only", name)
	}
	if l1.In() != l0.Out() {
		return 0, 0, 0, inputErrorf("%s: layer 2 takes %d inputs but layer 1 gives %d", name, l1.In(), l0.Out())
	}
	return l0.In(), l0.Out(), l1.Out(), nil
}
