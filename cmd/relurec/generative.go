package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/relurec/relurec/internal/jsonsafe"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/generative"
	"github.com/relurec/relurec/synth"
)

// parseBias reads --bias (empty means none).
func parseBias(s string) (density.Density, error) {
	if s == "" {
		return nil, nil
	}
	p, err := density.Parse(s)
	if err != nil {
		return nil, usageErrorf("--bias: %v", err)
	}
	return p, nil
}

// ------------------------------------------------------------ gen generative

type genGenerativeOptions struct {
	D     int     `json:"d"`
	K     int     `json:"k"`
	N     int     `json:"n"`
	Bias  string  `json:"bias"`
	Noise float64 `json:"noise"`
	Seed  uint64  `json:"seed"`
	Out   string  `json:"out"`
}

const genGenerativeLong = `Generate an instance of the ReLU generative model of Mazumdar and Rawat:
A (d×k) with iid N(0,1) entries, codes C (n×k) with iid N(0, 1/k) entries,
one bias b (length d) with iid coordinates from --bias, and the observations
Y = ReLU(C·Aᵀ + 1·bᵀ) (n×d, one observation per row), optionally with
Gaussian noise of standard deviation --noise on the pre-activations.

The .npz given by --out holds Y, A, C, M = C·Aᵀ and b (1×d); a manifest is
written next to it.`

const genGenerativeExample = `  # The reference instance of docs/generative.md: d=100, k=3, n=800, bias N(0,1)
  relurec gen generative --d 100 --k 3 --n 800 --bias gaussian:0,1 --seed 1 --out gen.npz
  relurec learn generative --y gen.npz --rank 3 --truth gen.npz --out A.npy`

func newGenGenerativeCmd(a *app) *cobra.Command {
	o := genGenerativeOptions{D: 100, K: 3, N: 800, Bias: "gaussian:0,1", Seed: 1}
	c := &cobra.Command{
		Use:     "generative",
		Short:   "Generate observations Y = ReLU(C·Aᵀ + 1·bᵀ) of a random ReLU generator",
		Long:    genGenerativeLong,
		Example: genGenerativeExample,
		Args:    cobra.NoArgs,
		RunE:    a.leaf(func(cmd *cobra.Command, _ []string) error { return a.runGenGenerative(o) }),
	}
	f := c.Flags()
	f.IntVar(&o.D, "d", o.D, "observed dimension d (units, columns of Y)")
	f.IntVar(&o.K, "k", o.K, "latent dimension k (columns of A)")
	f.IntVar(&o.N, "n", o.N, "number of observations (rows of Y)")
	f.StringVar(&o.Bias, "bias", o.Bias, "bias density: gaussian:MEAN,STD, logistic:LOC,SCALE, laplace:LOC,SCALE, exp:SHIFT,RATE or uniform:LO,HI")
	f.Float64Var(&o.Noise, "noise", 0, "standard deviation of Gaussian noise on the pre-activations (0 = noiseless)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "random seed")
	f.StringVar(&o.Out, "out", "", "output .npz (Y, A, C, M, b); required")
	return c
}

// validate checks the flags of gen generative and parses the bias density.
func (o *genGenerativeOptions) validate() (density.Density, error) {
	bias, err := parseBias(o.Bias)
	if err != nil {
		return nil, err
	}
	if o.K < 1 || o.D <= o.K || o.N <= o.K {
		return nil, usageErrorf("need 1 ≤ --k < min(--d, --n), got d=%d, k=%d, n=%d", o.D, o.K, o.N)
	}
	if math.IsNaN(o.Noise) || math.IsInf(o.Noise, 0) || o.Noise < 0 {
		return nil, usageErrorf("--noise must be finite and ≥ 0, got %g", o.Noise)
	}
	var mem genMemory
	mem.matrix("Y", o.N, o.D)
	mem.matrix("M", o.N, o.D)
	mem.matrix("C", o.N, o.K)
	mem.matrix("A", o.D, o.K)
	if err := mem.check("use a smaller --n, --d or --k"); err != nil {
		return nil, err
	}
	if err := checkOutputs(nil, [3]string{"out", o.Out, ".npz"}); err != nil {
		return nil, err
	}
	if o.Out == "" {
		return nil, usageErrorf("--out is required")
	}
	return bias, nil
}

// runGenGenerative is gen generative: validate, draw, write, print.
func (a *app) runGenGenerative(o genGenerativeOptions) error {
	start := time.Now()
	bias, err := o.validate()
	if err != nil {
		return err
	}
	in, err := synth.GenerativeData(synth.GenerativeConfig{D: o.D, K: o.K, N: o.N, Bias: bias, Noise: o.Noise}, synth.NewRand(o.Seed))
	if err != nil {
		return a.magnitudeError(err)
	}
	arrays := map[string]*mat.Dense{"Y": in.Y, "A": in.A, "C": in.C, "M": in.M, "b": rowMatrix(in.B)}
	if err := a.checkGenerated(nil, arrays); err != nil {
		return err
	}
	man := dataio.NewManifest("gen generative", a.args)
	man.Version, man.Options, man.Seed = relurecVersion(), o, o.Seed
	frac := in.FractionPositive()
	man.Results = map[string]any{"fraction_positive": frac}
	files, err := a.writeAll(man, []outFile{{o.Out, func(p string) error {
		return dataio.WriteNPZ(p, arrays)
	}}})
	if err != nil {
		return err
	}
	res := map[string]any{"command": "gen generative", "options": o, "outputs": files, "fraction_positive": frac,
		"y_shape": dims(in.Y), "a_shape": dims(in.A), "seconds": time.Since(start).Seconds()}
	return a.emit(res, func(w io.Writer) {
		table(w, [][2]string{
			{"data", fmt.Sprintf("%s  (Y %d×%d, A %d×%d, C %d×%d, M, b)", o.Out, o.N, o.D, o.D, o.K, o.N, o.K)},
			{"bias", bias.Name()},
			{"positive entries", fmt.Sprintf("%.1f%%", 100*frac)},
			{"seed", fmt.Sprint(o.Seed)},
			{"manifest", manifestList(files)},
			{"time", seconds(time.Since(start))},
		})
	})
}

// ------------------------------------------------------------ learn generative

// learnGenerativeOptions are the flags of learn generative, as recorded in
// the manifest: the files, and generative.Options (whose Bias density is
// given here as its --bias string).
type learnGenerativeOptions struct {
	Y     string `json:"y"`
	YName string `json:"y_name"`
	generative.Options
	Bias      string `json:"bias,omitempty"`
	Truth     string `json:"truth,omitempty"`
	TruthName string `json:"truth_name,omitempty"`
	Out       string `json:"out"`
	MOut      string `json:"m_out,omitempty"`
}

type learnGenerativeResult struct {
	Command     string                 `json:"command"`
	Out         string                 `json:"out"`
	MOut        string                 `json:"m_out,omitempty"`
	N           int                    `json:"n"`
	D           int                    `json:"d"`
	Rank        int                    `json:"rank"`
	Route       string                 `json:"route"`
	Reason      string                 `json:"reason"`
	Certificate generative.Certificate `json:"certificate"`
	Diagnostics generative.Diagnostics `json:"diagnostics"`
	Warnings    []string               `json:"warnings"`
	// Against --truth: ‖sinΘ‖_F overall and on units with ≥ k+2 positives.
	SinTheta           *float64               `json:"sin_theta,omitempty"`
	SinThetaRestricted *float64               `json:"sin_theta_restricted,omitempty"`
	Seconds            float64                `json:"seconds"`
	Options            learnGenerativeOptions `json:"options"`
}

const learnGenerativeLong = `Learn the column space of the generator A (d×k) and the centred M = C·Aᵀ from
observations Y (n×d, one per row, all entries ≥ 0), following Mazumdar and
Rawat's ReLU generative model.

Solvers: "als" (default; censored alternating least squares, needs no bias
density) or "admm" (the paper's maximum likelihood with a rank constraint,
needs --bias). With --bias, the gauge of M is chosen by maximum likelihood
and the bias is estimated too.

--out receives a d×k orthonormal basis of col(A) (.npy). --m-out (.npz)
receives MCentred (n×d), Offset (1×d), Factor (d×k), Codes (n×k) and, with
--bias, M and b. --truth (an .npy, or an .npz with the array named by
--truth-name, e.g. the output of relurec gen generative) reports ‖sinΘ‖_F.
Units active on at most k observations cannot be identified; the result
says how many there are.`

const learnGenerativeExample = `  relurec gen generative --d 100 --k 3 --n 800 --seed 1 --out gen.npz
  relurec learn generative --y gen.npz --rank 3 --truth gen.npz --out A.npy

  # Maximum likelihood with a known Laplace bias, and the fitted M
  relurec learn generative --y Y.npy --rank 3 --solver admm --bias laplace:0,1 --out A.npy --m-out fit.npz`

func newLearnGenerativeCmd(a *app) *cobra.Command {
	o := learnGenerativeOptions{YName: "Y", Options: generative.Options{Solver: generative.SolverALS}, TruthName: "A"}
	c := &cobra.Command{
		Use:     "generative",
		Short:   "Learn col(A) from Y = ReLU(C·Aᵀ + 1·bᵀ) (observations as rows)",
		Long:    learnGenerativeLong,
		Example: learnGenerativeExample,
		Args:    cobra.NoArgs,
		RunE:    a.leaf(func(cmd *cobra.Command, _ []string) error { return a.runLearnGenerative(cmd, &o) }),
	}
	f := c.Flags()
	f.StringVar(&o.Y, "y", "", "observations Y, n×d, one per row (.npy, .csv, or .npz with --y-name)")
	f.StringVar(&o.YName, "y-name", o.YName, "name of the Y array inside an .npz")
	f.IntVar(&o.Rank, "rank", 0, "latent dimension k; required")
	f.StringVar(&o.Bias, "bias", "", "bias density (gaussian:MEAN,STD, laplace:LOC,SCALE, logistic:…, exp:SHIFT,RATE, uniform:LO,HI); needed by --solver admm")
	f.StringVar((*string)(&o.Solver), "solver", string(o.Solver), "als (censored ALS, default) or admm (maximum likelihood)")
	f.Float64Var(&o.Gamma, "gamma", 0, "bound γ ≥ ‖M‖_∞ for admm (0 = max(Y) + a bias quantile)")
	f.IntVar(&o.MaxIter, "max-iter", 0, "maximum sweeps/iterations (0 = 500 for als, 2000 for admm)")
	f.Float64Var(&o.PosTol, "pos-tol", 0, "entries above this count as active (raise for noisy zeros)")
	f.StringVar(&o.Truth, "truth", "", "true A (d×k) to score against (.npy, or .npz with --truth-name)")
	f.StringVar(&o.TruthName, "truth-name", o.TruthName, "name of the true A inside an .npz")
	f.StringVar(&o.Out, "out", "", "output .npy for the d×k orthonormal basis of col(A); required")
	f.StringVar(&o.MOut, "m-out", "", "optional .npz for the fitted M (centred), offset, factors, and M, b with --bias")
	return c
}

// validate checks the flags of learn generative (generative.Options by its
// Validate) and the output paths; it returns the input files.
func (o *learnGenerativeOptions) validate() ([]string, error) {
	if o.Y == "" {
		return nil, usageErrorf("--y is required (Y.npy, or an .npz holding Y)")
	}
	bias, err := parseBias(o.Bias)
	if err != nil {
		return nil, err
	}
	o.Options.Bias = bias
	if err := o.Options.Validate(); err != nil {
		return nil, optionsUsageError(err)
	}
	if o.Out == "" {
		return nil, usageErrorf("--out is required")
	}
	inputs := []string{o.Y}
	if o.Truth != "" {
		inputs = append(inputs, o.Truth)
	}
	if err := checkOutputs(inputs, [3]string{"out", o.Out, ".npy"}, [3]string{"m-out", o.MOut, ".npz"}); err != nil {
		return nil, err
	}
	return inputs, nil
}

// read reads Y and, with --truth, the true A (d×k).
func (o *learnGenerativeOptions) read(ctx context.Context) (Y, truth *mat.Dense, err error) {
	if Y, err = readInput(ctx, "Y", o.Y, o.YName); err != nil {
		return nil, nil, err
	}
	if o.Truth != "" {
		if truth, err = readInput(ctx, "truth", o.Truth, o.TruthName); err != nil {
			return nil, nil, err
		}
		if r, c := truth.Dims(); r != Y.RawMatrix().Cols || c != o.Rank {
			return nil, nil, inputErrorf("--truth is %d×%d but col(A) is %d×%d (d×k)", r, c, Y.RawMatrix().Cols, o.Rank)
		}
	}
	return Y, truth, nil
}

// runLearnGenerative is learn generative: validate, read, fit, score, write,
// print.
func (a *app) runLearnGenerative(cmd *cobra.Command, o *learnGenerativeOptions) error {
	start := time.Now()
	inputs, err := o.validate()
	if err != nil {
		return err
	}
	man, err := a.newManifest("learn generative", *o, 0, inputs...)
	if err != nil {
		return err
	}
	Y, truth, err := o.read(a.context())
	if err != nil {
		return err
	}
	progress, clear := a.progress()
	opt := o.Options
	opt.Progress = progress
	res, err := generative.Fit(cmd.Context(), Y, opt)
	clear()
	if err != nil {
		return err
	}
	n, d := Y.Dims()
	out := learnGenerativeResult{Command: "learn generative", Out: o.Out, MOut: o.MOut, N: n, D: d, Rank: o.Rank,
		Route: res.Route, Reason: res.Reason, Certificate: res.Certificate, Diagnostics: res.Diagnostics,
		Warnings: append([]string{}, res.Warnings...), Options: *o}
	if truth != nil {
		out.SinTheta, out.SinThetaRestricted = scoreColSpace(Y, truth, res.Basis, o.Rank, o.PosTol)
	}
	outs := []outFile{{o.Out, func(p string) error { return dataio.WriteNPY(p, res.Basis) }}}
	if o.MOut != "" {
		outs = append(outs, outFile{o.MOut, func(p string) error { return dataio.WriteNPZ(p, fitArrays(res)) }})
	}
	out.Seconds = time.Since(start).Seconds()
	man.Results = jsonsafe.Finite(out)
	if _, err := a.writeAll(man, outs); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printLearnGenerative(w, o, res, out) })
}

// scoreColSpace returns ‖sinΘ‖_F between the true A and the learnt basis,
// overall and on the units with ≥ k+2 positive observations (nil where it
// cannot be computed).
func scoreColSpace(Y, truth, basis *mat.Dense, k int, posTol float64) (all, restricted *float64) {
	if s, err := generative.SinTheta(truth, basis); err == nil {
		all = &s
	}
	if rows := generative.WellObservedRows(Y, k+2, posTol); len(rows) > 0 {
		if s, err := generative.SinThetaRows(truth, basis, rows); err == nil {
			restricted = &s
		}
	}
	return all, restricted
}

// fitArrays are the arrays of --m-out.
func fitArrays(res *generative.Result) map[string]*mat.Dense {
	arr := map[string]*mat.Dense{"MCentred": res.MCentred, "Offset": rowMatrix(res.Offset), "Factor": res.Factor, "Codes": res.Codes}
	if res.M != nil {
		arr["M"] = res.M
		arr["b"] = rowMatrix(res.Bias)
	}
	return arr
}

// printLearnGenerative writes the human table of learn generative.
func printLearnGenerative(w io.Writer, o *learnGenerativeOptions, res *generative.Result, out learnGenerativeResult) {
	cert := fmt.Sprintf("equality residual %.2g, censoring violation %.2g (tol %.0e): ", res.Certificate.EqualityResidual, res.Certificate.CensorViolation, res.Certificate.Tol)
	if res.Certificate.Met {
		cert += "Y is explained exactly"
	} else {
		cert += "not met"
	}
	dg := res.Diagnostics
	rows := [][2]string{
		{"data", fmt.Sprintf("n=%d observations, d=%d units, k=%d", out.N, out.D, o.Rank)},
		{"route", res.Route},
		{"reason", res.Reason},
		{"units", fmt.Sprintf("%d well observed (≥ k+2 positives), %d rarely active (≤ k), %d dead; %.1f%% entries positive", dg.WellObserved, dg.RarelyActive, dg.DeadRows, 100*dg.FractionPositive)},
		{"iterations", fmt.Sprintf("%d (converged: %v)", dg.Iterations, dg.Converged)},
		{"certificate", cert},
	}
	if out.SinTheta != nil {
		r := "n/a"
		if out.SinThetaRestricted != nil {
			r = fmt.Sprintf("%.3g", *out.SinThetaRestricted)
		}
		rows = append(rows, [2]string{"‖sinΘ‖_F vs truth", fmt.Sprintf("%.3g overall, %s on well-observed units", *out.SinTheta, r)})
	}
	rows = append(rows, labelled("warnings", res.Warnings)...)
	rows = append(rows, [2]string{"time", fmt.Sprintf("%.2f s", out.Seconds)}, [2]string{"basis", o.Out})
	if o.MOut != "" {
		rows = append(rows, [2]string{"fit", o.MOut})
	}
	table(w, rows)
}
