package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/learner"
	"github.com/relurec/relurec/twolayer"
)

const learnLong = `Learn a ReLU network's weights from input/output samples. Given only data
and an output file, "relurec learn" looks at the data and picks the learner,
saying why (package learner):

  - inputs not Gaussian        → the two-layer learner's worst-case route
                                 (Y = ReLU(X·Vᵀ)·Uᵀ, any X, no biases)
  - one output                 → the depth-2 learner (y = A·ReLU(W·x + b) + c)
  - biases seen in the moments → the depth-2 learner
  - otherwise                  → the two-layer learner; if its certificate
                                 fails, the depth-2 learner is tried too

PyTorch's nn.Sequential(nn.Linear(d, k), nn.ReLU(), nn.Linear(k, m)) has biases
by default: its data go to the depth-2 learner, and the model file's keys
(0.weight, 0.bias, 2.weight, 2.bias) load with load_state_dict(strict=True).

Every answer carries a residual certificate ‖Y − f(X)‖/‖Y‖ ≤ --cert-tol. The
subcommands run one learner with all its options.

An --x/--y pair of .npy files larger than --max-memory is read by rows: the
learner fits a random sample of the rows (--seed draws it) and the answer is
certified on all of them in a second pass (docs/scale.md).

` + notCertifiedHelp

const learnExample = `  # Data from a PyTorch MLP, saved by numpy: np.savez("q.npz", X=X, Y=Y)
  relurec learn --data q.npz --out model.safetensors

  # Known width, ONNX output
  relurec learn --x X.npy --y Y.npy --hidden 5 --out model.onnx

  # X.npy and Y.npy larger than memory: fitted on a sample, certified on every row
  relurec --max-memory 2GB learn --x X.npy --y Y.npy --out model.safetensors

  # Noisy outputs: write the best fit although it is not certified (exit status 3)
  relurec learn --data noisy.npz --refine --approximate --out model.safetensors
  status=$?   # 0 exact, 3 not certified (here: written all the same)

` + torchLoadExample + `

  # One learner, all its options
  relurec learn twolayer --data data.npz --route noisy --refine --approximate --out model.safetensors
  relurec learn depth2 --data data.npz --hidden 7 --order 2 --out model.safetensors`

// newLearnCmd is "relurec learn": the front door when given data, the group
// of the learners' own commands otherwise.
func newLearnCmd(a *app) *cobra.Command {
	var df dataFlags
	opt := learnTwoLayerOptions{Options: twolayer.Options{Route: twolayer.UseAuto, Whiten: twolayer.WhitenAuto, Activation: "relu"}, DType: "f64"}
	subs := []*cobra.Command{newLearnTwoLayerCmd(a), newLearnGenerativeCmd(a), newLearnDepth2Cmd(a)}
	c := &cobra.Command{
		Use:     "learn",
		Short:   "Learn network weights from input/output samples (the learner is chosen from the data)",
		Long:    learnLong,
		Example: learnExample,
		Args:    cobra.ArbitraryArgs,
		RunE: a.leaf(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 || cmd.Flags().NFlag() == 0 {
				return learnUsage(cmd, args, subs)
			}
			return a.runLearnTwoLayer(cmd, "learn", &df, opt)
		}),
	}
	c.AddCommand(subs...)
	df.register(c)
	f := c.Flags()
	f.IntVar(&opt.Hidden, "hidden", 0, "hidden units (0 = infer from the data)")
	f.Float64Var(&opt.CertTol, "cert-tol", 0, "relative residual that certifies exact recovery (0 = 1e-10)")
	f.Uint64Var(&opt.Seed, "seed", 0, "random seed for the learner's random choices")
	f.BoolVar(&opt.Refine, "refine", false, "refine the two-layer learner's noisy-route estimate by local least squares")
	f.StringVar(&opt.Out, "out", "", "output model file (.safetensors or .onnx); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	f.BoolVar(&opt.Approximate, "approximate", false, approximateHelp)
	return c
}

// learnUsage is the answer to "relurec learn" without data flags, or with
// an unknown subcommand.
func learnUsage(cmd *cobra.Command, args []string, subs []*cobra.Command) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.Name()
	}
	if len(args) > 0 {
		return usageErrorf("unknown subcommand %q for %s (available: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
	return usageErrorf("%s needs data and an output (--data data.npz --out model.safetensors), or a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", "))
}

// learnRun is what a learn command has read and measured before it writes
// the answer of whichever learner ran.
type learnRun struct {
	command   string
	start     time.Time
	read, fit time.Duration
	x, y      *mat.Dense
	man       *dataio.Manifest
	// choice is the front door's record (nil when one learner was named).
	choice *learner.Choice
	// stream is set when x and y are a sample of larger data.
	stream *streamed
}

func (r learnRun) timings() map[string]float64 {
	t := map[string]float64{"read": r.read.Seconds(), "fit": r.fit.Seconds()}
	if r.stream != nil {
		t["certify"] = r.stream.certify.Seconds()
	}
	return t
}

// samples is the number of rows the answer is certified on.
func (r learnRun) samples() int {
	if r.stream != nil {
		return r.stream.rows
	}
	n, _ := r.x.Dims()
	return n
}

// learnerRows are the human table's lines for the front door's choice.
func learnerRows(ch *learner.Choice) [][2]string {
	if ch == nil {
		return nil
	}
	rows := [][2]string{{"learner", fmt.Sprintf("%s: %s", ch.Learner, ch.Reason)}}
	return append(rows, labelled("checks", ch.Considered)...)
}
