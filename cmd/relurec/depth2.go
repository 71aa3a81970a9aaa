package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/relurec/relurec/internal/jsonsafe"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// depth2Gen is a synthetic depth-2 problem y = A·ReLU(W·x + b) (+ c) + noise.
type depth2Gen struct {
	D             int     `json:"d"`
	M             int     `json:"m"`
	Outputs       int     `json:"outputs"`
	N             int     `json:"n"`
	BiasMax       float64 `json:"bias_max"`
	AMin          float64 `json:"a_min"`
	AMax          float64 `json:"a_max"`
	MinSeparation float64 `json:"min_separation"`
	Smoothing     float64 `json:"smoothing"`
	OutputBias    bool    `json:"output_bias"`
	NoiseKind     string  `json:"noise_kind"`
	Noise         float64 `json:"noise"`
	Seed          uint64  `json:"seed"`
}

func (g *depth2Gen) validate() error {
	for _, v := range []struct {
		name string
		val  int
	}{{"d", g.D}, {"m", g.M}, {"outputs", g.Outputs}, {"n", g.N}} {
		if v.val < 1 {
			return usageErrorf("--%s must be at least 1, got %d", v.name, v.val)
		}
	}
	for _, v := range []struct {
		name string
		val  float64
	}{{"bias-max", g.BiasMax}, {"a-min", g.AMin}, {"a-max", g.AMax}, {"min-separation", g.MinSeparation}, {"smoothing", g.Smoothing}, {"noise", g.Noise}} {
		if math.IsNaN(v.val) || math.IsInf(v.val, 0) || v.val < 0 {
			return usageErrorf("--%s must be a finite number ≥ 0, got %g", v.name, v.val)
		}
	}
	if g.AMax < g.AMin {
		return usageErrorf("--a-max %g is below --a-min %g", g.AMax, g.AMin)
	}
	switch g.NoiseKind {
	case "gaussian", "subgaussian":
	case "none":
		if g.Noise > 0 {
			return usageErrorf("--noise-kind none contradicts --noise %g", g.Noise)
		}
	default:
		return usageErrorf("--noise-kind must be gaussian, subgaussian or none, got %q", g.NoiseKind)
	}
	if float64(g.N)*float64(g.D+g.Outputs) > 2e9 {
		return usageErrorf("--n %d with d+outputs = %d needs %.1f GB of memory; use a smaller --n", g.N, g.D+g.Outputs, float64(g.N)*float64(g.D+g.Outputs)*8/1e9)
	}
	return nil
}

func (g *depth2Gen) config() synth.Depth2Config {
	return synth.Depth2Config{D: g.D, M: g.M, Outputs: g.Outputs, BiasMax: g.BiasMax, AMin: g.AMin, AMax: g.AMax,
		MinSeparation: g.MinSeparation, Smoothing: g.Smoothing, OutputBias: g.OutputBias}
}

// generate draws the teacher, X and Y from one seeded stream, in that order.
func (g *depth2Gen) generate() (*generated, error) {
	rng := synth.NewRand(g.Seed)
	teacher, err := synth.Depth2Teacher(g.config(), rng)
	if err != nil {
		return nil, fmt.Errorf("generating the teacher: %w", err)
	}
	x, err := synth.GaussianInputs(g.N, g.D, nil, rng)
	if err != nil {
		return nil, fmt.Errorf("generating inputs: %w", err)
	}
	noise := synth.Noise{Kind: "none"}
	if g.Noise > 0 {
		noise = synth.Noise{Kind: g.NoiseKind, Level: g.Noise}
	}
	y, sigma, err := synth.Depth2Data(teacher, x, noise, rng)
	if err != nil {
		return nil, fmt.Errorf("generating outputs: %w", err)
	}
	return &generated{teacher: teacher, x: x, y: y, sigma: sigma}, nil
}

func newGenDepth2Cmd(a *app) *cobra.Command {
	g := depth2Gen{D: 10, M: 5, Outputs: 1, N: 100_000, BiasMax: 1, AMin: 0.5, AMax: 2, NoiseKind: "gaussian", Seed: 1}
	var out, xOut, yOut, modelOut string
	c := &cobra.Command{
		Use:   "depth2",
		Short: "Generate data from a random depth-2 ReLU network with biases, y = A·ReLU(W·x + b) (+ noise)",
		Long: `Generate a random depth-2 teacher y = A·ReLU(W·x + b) (+ c) in the "B-bounded"
normalisation of Awasthi, Tang and Vijayaraghavan: unit rows w_i, biases
uniform in [−bias-max, bias-max], output weights of magnitude uniform in
[a-min, a-max] with random signs. --m may exceed --d (the overcomplete case,
learnable up to m ≤ d(d+1)/2 with --order 2). Inputs X are standard Gaussian
(n×d); Y is n×outputs, with optional noise whose standard deviation is
--noise times the RMS of the clean outputs.

Outputs as for gen twolayer: one .npz (--out), X.npy and Y.npy in a directory
(--out DIR/), or --x and --y; --model-out writes the teacher as safetensors
(PyTorch keys 0.weight, 0.bias, 2.weight, 2.bias). A run manifest is written
next to every output.`,
		Example: `  # The issue's instance: d=10, m=5, |b| ≤ 1, |a| ∈ [0.5, 2], 1e6 noiseless samples
  relurec gen depth2 --d 10 --m 5 --n 1000000 --seed 1 --out data.npz --model-out teacher.safetensors

  # Overcomplete: 7 units in 4 dimensions, kept apart, separate files
  relurec gen depth2 --d 4 --m 7 --min-separation 0.3 --n 1000000 --x X.npy --y Y.npy

  # Noisy, three outputs with output biases
  relurec gen depth2 --outputs 3 --output-bias --noise 0.1 --out noisy/`,
		Args: cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			if err := g.validate(); err != nil {
				return err
			}
			files, err := genOutputs(out, xOut, yOut)
			if err != nil {
				return err
			}
			var outputs [][2]string
			switch {
			case files.dir != "":
			case files.x == files.y:
				outputs = append(outputs, [2]string{"out", files.x})
			default:
				outputs = append(outputs, [2]string{"x", files.x}, [2]string{"y", files.y})
			}
			if modelOut != "" {
				outputs = append(outputs, [2]string{"model-out", modelOut})
				for _, p := range []string{files.x, files.y} {
					if dataio.CheckOutputNotInput(modelOut, p) != nil {
						return usageErrorf("two outputs are the same file: %s", modelOut)
					}
				}
			}
			for _, o := range outputs {
				if err := checkOutPath(o[0], o[1]); err != nil {
					return err
				}
			}
			gen, err := g.generate()
			if err != nil {
				return err
			}
			genTime := time.Since(start)
			var written []string
			ok := false
			defer func() {
				if !ok {
					for _, p := range written {
						os.Remove(p)
					}
				}
			}()
			if files.dir != "" {
				if err := os.MkdirAll(files.dir, 0o755); err != nil {
					return fmt.Errorf("creating %s: %w", files.dir, err)
				}
			}
			if files.x == files.y {
				if err := dataio.WriteNPZ(files.x, map[string]*mat.Dense{"X": gen.x, "Y": gen.y}); err != nil {
					return err
				}
				written = append(written, files.x)
			} else {
				if err := dataio.WriteNPY(files.x, gen.x); err != nil {
					return err
				}
				written = append(written, files.x)
				if err := dataio.WriteNPY(files.y, gen.y); err != nil {
					return err
				}
				written = append(written, files.y)
			}
			if modelOut != "" {
				meta := map[string]string{
					"producer": "relurec gen depth2", "relurec_version": relurecVersion(), "generator": "synth.Depth2Teacher",
					"d": strconv.Itoa(g.D), "m": strconv.Itoa(g.M), "outputs": strconv.Itoa(g.Outputs),
					"bias_max": strconv.FormatFloat(g.BiasMax, 'g', -1, 64), "seed": strconv.FormatUint(g.Seed, 10),
				}
				if err := nn.SaveModel(modelOut, gen.teacher, meta, ""); err != nil {
					return err
				}
				written = append(written, modelOut)
			}
			man := dataio.NewManifest("gen depth2", a.args)
			man.Version = relurecVersion()
			man.Options = g
			man.Seed = g.Seed
			man.Timings["generate"] = genTime.Seconds()
			man.Timings["write"] = time.Since(start).Seconds() - genTime.Seconds()
			man.Results = map[string]any{"noise_sigma": gen.sigma}
			for _, p := range written {
				if err := man.AddOutput(p); err != nil {
					return err
				}
			}
			man.Finish()
			dataFiles := append([]string(nil), written...)
			for _, p := range dataFiles {
				mp := dataio.ManifestPath(p)
				if err := man.Write(mp); err != nil {
					return err
				}
				written = append(written, mp)
			}
			ok = true
			res := struct {
				Command    string    `json:"command"`
				Options    depth2Gen `json:"options"`
				Outputs    []string  `json:"outputs"`
				XShape     [2]int    `json:"x_shape"`
				YShape     [2]int    `json:"y_shape"`
				NoiseSigma float64   `json:"noise_sigma"`
				Seconds    float64   `json:"seconds"`
			}{"gen depth2", g, dataFiles, dims(gen.x), dims(gen.y), gen.sigma, time.Since(start).Seconds()}
			return a.emit(res, func(w io.Writer) {
				rows := [][2]string{}
				if files.x == files.y {
					rows = append(rows, [2]string{"data", fmt.Sprintf("%s  (X %d×%d, Y %d×%d)", files.x, res.XShape[0], res.XShape[1], res.YShape[0], res.YShape[1])})
				} else {
					rows = append(rows,
						[2]string{"X", fmt.Sprintf("%s  (%d×%d)", files.x, res.XShape[0], res.XShape[1])},
						[2]string{"Y", fmt.Sprintf("%s  (%d×%d)", files.y, res.YShape[0], res.YShape[1])})
				}
				if modelOut != "" {
					rows = append(rows, [2]string{"teacher", fmt.Sprintf("%s  (W %d×%d, A %d×%d, biases)", modelOut, g.M, g.D, g.Outputs, g.M)})
				}
				noise := "none"
				if g.Noise > 0 {
					noise = fmt.Sprintf("%s, level %g (σ = %.3g)", g.NoiseKind, g.Noise, gen.sigma)
				}
				rows = append(rows,
					[2]string{"noise", noise},
					[2]string{"seed", strconv.FormatUint(g.Seed, 10)},
					[2]string{"manifests", manifestList(dataFiles)},
					[2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
				table(w, rows)
			})
		}),
	}
	f := c.Flags()
	f.IntVar(&g.D, "d", g.D, "input dimension d (columns of X)")
	f.IntVar(&g.M, "m", g.M, "hidden units m (m > d is the overcomplete case)")
	f.IntVar(&g.Outputs, "outputs", g.Outputs, "number of outputs (columns of Y)")
	f.IntVar(&g.N, "n", g.N, "number of samples (rows of X and Y)")
	f.Float64Var(&g.BiasMax, "bias-max", g.BiasMax, "hidden biases uniform in [−bias-max, bias-max]")
	f.Float64Var(&g.AMin, "a-min", g.AMin, "smallest |output weight|")
	f.Float64Var(&g.AMax, "a-max", g.AMax, "largest |output weight|")
	f.Float64Var(&g.MinSeparation, "min-separation", g.MinSeparation, "redraw W until every pair of unit rows is this far apart up to sign (0 = no constraint)")
	f.Float64Var(&g.Smoothing, "smoothing", g.Smoothing, "perturb W by N(0, τ²/d) before normalising (smoothed analysis; 0 = none)")
	f.BoolVar(&g.OutputBias, "output-bias", false, "draw output biases c ~ N(0, 1) (default: none, the paper's model)")
	f.Float64Var(&g.Noise, "noise", g.Noise, "noise σ relative to the RMS of the clean outputs (0 = noiseless)")
	f.StringVar(&g.NoiseKind, "noise-kind", g.NoiseKind, "noise distribution when --noise > 0: gaussian or subgaussian")
	f.Uint64Var(&g.Seed, "seed", g.Seed, "random seed; the same seed gives the same teacher and data")
	f.StringVar(&out, "out", "", "output .npz (X and Y), or a directory ending in / for X.npy and Y.npy")
	f.StringVar(&xOut, "x", "", "write X to this .npy (with --y, instead of --out)")
	f.StringVar(&yOut, "y", "", "write Y to this .npy (with --x, instead of --out)")
	f.StringVar(&modelOut, "model-out", "", "also write the teacher network to this .safetensors file")
	return c
}

// learnDepth2Options are the flags of learn depth2, as recorded in the
// manifest.
type learnDepth2Options struct {
	X       string  `json:"x,omitempty"`
	Y       string  `json:"y,omitempty"`
	Data    string  `json:"data,omitempty"`
	XName   string  `json:"x_name,omitempty"`
	YName   string  `json:"y_name,omitempty"`
	Hidden  int     `json:"hidden"`
	Order   int     `json:"order"`
	Route   string  `json:"route"`
	Affine  bool    `json:"affine"`
	CertTol float64 `json:"cert_tol,omitempty"`
	Seed    uint64  `json:"seed"`
	Out     string  `json:"out"`
	DType   string  `json:"dtype"`
}

type learnDepth2Result struct {
	Command     string             `json:"command"`
	Out         string             `json:"out"`
	Samples     int                `json:"samples"`
	D           int                `json:"d"`
	Outputs     int                `json:"outputs"`
	Hidden      int                `json:"hidden"`
	SavedUnits  int                `json:"saved_units"`
	Route       string             `json:"route"`
	Reason      string             `json:"reason"`
	Certificate depth2.Certificate `json:"certificate"`
	Diagnostics depth2.Diagnostics `json:"diagnostics"`
	Warnings    []string           `json:"warnings"`
	Seconds     float64            `json:"seconds"`
	Timings     map[string]float64 `json:"timings"`
	Options     learnDepth2Options `json:"options"`
	Manifest    string             `json:"manifest"`
}

func newLearnDepth2Cmd(a *app) *cobra.Command {
	var df dataFlags
	opt := learnDepth2Options{Route: "auto", DType: "f64"}
	c := &cobra.Command{
		Use:   "depth2",
		Short: "Learn y = A·ReLU(W·x + b) + c from samples with Hermite moments (exact when noiseless)",
		Long: `Learn a depth-2 ReLU network with biases, y = A·ReLU(W·x + b) + c, from
samples X (n×d, standard Gaussian inputs) and Y (n×p), with the Hermite-moment
algorithms of Awasthi, Tang and Vijayaraghavan: moments up to order 2ℓ+2 (the
dimension first reduced to m through the order-2 moment), Jennrich's algorithm
on two consecutive orders, the scalar recovery and, for ℓ = 1, the sign fix
from the first moment. A local least-squares refinement (not in the paper)
then makes the answer exact on noiseless data, with a residual certificate
‖Y − f(X)‖/‖Y‖ ≤ --cert-tol.

Routes: "auto" (moments, least squares, refinement), "exact" (fails unless
the certificate holds), "moments" (the paper's moment estimate only),
"improper" (Algorithm 5: moment units plus an affine term by least squares).
--order 2 handles more units than inputs (m ≤ d(d+1)/2; needs --hidden), up
to the sign flip (w, b) → (−w, −b) of each unit, which the refinement
resolves when the network has no affine part.

The model is written atomically as safetensors with PyTorch nn.Sequential
keys (0.weight = W, 0.bias = b, 2.weight = A, 2.bias = c) and provenance in
the metadata, plus <out>.manifest.json. An affine term, if kept, is stored
exactly as pairs of units (ReLU(z) − ReLU(−z) = z).`,
		Example: `  # Learn from one .npz holding X and Y; the width is inferred
  relurec learn depth2 --data data.npz --out model.safetensors

  # Separate files, known width, the paper's moment estimate only
  relurec learn depth2 --x X.npy --y Y.npy --hidden 5 --route moments --out moments.safetensors

  # Overcomplete: 7 units in 4 dimensions
  relurec learn depth2 --x X.npy --y Y.npy --hidden 7 --order 2 --out model.safetensors

  # Load in PyTorch:
  #   net = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
  #   net.load_state_dict(safetensors.torch.load_file("model.safetensors"))`,
		Args: cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			if err := df.validate(); err != nil {
				return err
			}
			opt.X, opt.Y, opt.Data, opt.XName, opt.YName = df.x, df.y, df.data, df.xName, df.yName
			if opt.Hidden < 0 {
				return usageErrorf("--hidden must be ≥ 0 (0 infers the width), got %d", opt.Hidden)
			}
			if opt.Order < 0 || opt.Order > depth2.MaxEll {
				return usageErrorf("--order must be 0 (auto), 1 or 2, got %d", opt.Order)
			}
			switch opt.Route {
			case "auto", "exact", "moments", "improper":
			default:
				return usageErrorf("--route must be auto, exact, moments or improper, got %q", opt.Route)
			}
			opt.DType = strings.ToLower(opt.DType)
			if opt.DType != "f64" && opt.DType != "f32" {
				return usageErrorf("--dtype must be f64 or f32, got %q", opt.DType)
			}
			if opt.CertTol < 0 || math.IsNaN(opt.CertTol) {
				return usageErrorf("--cert-tol must be ≥ 0, got %g", opt.CertTol)
			}
			if err := checkOutPath("out", opt.Out); err != nil {
				return err
			}
			for _, o := range []string{opt.Out, dataio.ManifestPath(opt.Out)} {
				if err := dataio.CheckOutputNotInput(o, df.paths()...); err != nil {
					return err
				}
			}
			man := dataio.NewManifest("learn depth2", a.args)
			man.Version = relurecVersion()
			man.Seed = opt.Seed
			man.Options = opt
			for _, p := range df.paths() {
				if err := man.AddInput(p); err != nil {
					return fmt.Errorf("reading input: %w", err)
				}
			}
			x, y, err := df.read()
			if err != nil {
				return err
			}
			readTime := time.Since(start)
			progress, clear := a.progress()
			fitStart := time.Now()
			res, err := depth2.Fit(cmd.Context(), x, y, depth2.Options{
				Hidden: opt.Hidden, Order: opt.Order, Route: opt.Route, Affine: opt.Affine,
				Seed: opt.Seed, CertTol: opt.CertTol, Progress: progress,
			})
			clear()
			if err != nil {
				return err
			}
			fitTime := time.Since(fitStart)
			n, d := x.Dims()
			_, p := y.Dims()
			mlp := res.Model.MLP()
			out := learnDepth2Result{
				Command: "learn depth2", Out: opt.Out, Samples: n, D: d, Outputs: p,
				Hidden: res.Diagnostics.Hidden, SavedUnits: mlp.Layers[0].Out(), Route: res.Route, Reason: res.Reason,
				Certificate: res.Certificate, Diagnostics: res.Diagnostics,
				Warnings: append([]string{}, res.Warnings...), Options: opt, Manifest: dataio.ManifestPath(opt.Out),
			}
			meta := map[string]string{
				"producer":             "relurec learn depth2",
				"relurec_version":      relurecVersion(),
				"route":                res.Route,
				"reason":               res.Reason,
				"certificate_residual": strconv.FormatFloat(res.Certificate.Residual, 'g', -1, 64),
				"certificate_tol":      strconv.FormatFloat(res.Certificate.Tol, 'g', -1, 64),
				"certificate_met":      strconv.FormatBool(res.Certificate.Met),
				"seed":                 strconv.FormatUint(opt.Seed, 10),
				"hidden":               strconv.Itoa(out.Hidden),
				"affine_pairs":         strconv.Itoa(max(out.SavedUnits-out.Hidden, 0) / 2),
				"order_ell":            strconv.Itoa(res.Diagnostics.Ell),
				"samples":              strconv.Itoa(n),
			}
			out.Timings = map[string]float64{"read": readTime.Seconds(), "fit": fitTime.Seconds()}
			man.Timings = out.Timings
			man.Results = jsonsafe.Finite(map[string]any{
				"route": res.Route, "reason": res.Reason, "hidden": out.Hidden, "saved_units": out.SavedUnits,
				"certificate": res.Certificate, "diagnostics": res.Diagnostics, "warnings": out.Warnings,
			})
			if err := writeModel(man, opt.Out, mlp, meta, opt.DType, out.Timings); err != nil {
				return err
			}
			out.Seconds = time.Since(start).Seconds()
			return a.emit(out, func(w io.Writer) {
				cert := fmt.Sprintf("%.3g (tol %.0e, not met)", res.Certificate.Residual, res.Certificate.Tol)
				if res.Certificate.Met {
					cert = fmt.Sprintf("%.3g ≤ %.0e: exact", res.Certificate.Residual, res.Certificate.Tol)
				}
				units := strconv.Itoa(out.Hidden)
				if res.Diagnostics.HiddenInferred {
					units += " (inferred from the order-2 moment)"
				}
				if out.SavedUnits > out.Hidden {
					units += fmt.Sprintf("; saved as %d units (affine term as pairs)", out.SavedUnits)
				}
				rows := [][2]string{
					{"data", fmt.Sprintf("n=%d, d=%d, outputs=%d", n, d, p)},
					{"route", res.Route},
					{"reason", res.Reason},
					{"order ℓ", strconv.Itoa(res.Diagnostics.Ell)},
					{"hidden units", units},
					{"moment estimate", fmt.Sprintf("relative residual %.3g", res.Diagnostics.MomentResidual)},
					{"certificate", cert},
				}
				if len(res.Warnings) == 0 {
					rows = append(rows, [2]string{"warnings", "none"})
				}
				for i, wmsg := range res.Warnings {
					label := ""
					if i == 0 {
						label = "warnings"
					}
					rows = append(rows, [2]string{label, wmsg})
				}
				rows = append(rows,
					[2]string{"time", fmt.Sprintf("%.2f s (fit %.2f s)", out.Seconds, fitTime.Seconds())},
					[2]string{"model", fmt.Sprintf("%s (%s)", opt.Out, opt.DType)},
					[2]string{"manifest", out.Manifest})
				table(w, rows)
			})
		}),
	}
	df.register(c)
	f := c.Flags()
	f.IntVar(&opt.Hidden, "hidden", 0, "hidden units m (0 = infer from the order-2 moment; required with --order 2)")
	f.IntVar(&opt.Order, "order", 0, "moment order ℓ: 1 (m ≤ d), 2 (overcomplete, m ≤ d(d+1)/2); 0 = from --hidden")
	f.StringVar(&opt.Route, "route", opt.Route, "auto, exact, moments or improper")
	f.BoolVar(&opt.Affine, "affine", false, "keep an affine term in the model (Algorithm 5's form)")
	f.Float64Var(&opt.CertTol, "cert-tol", 0, "relative residual that certifies exact recovery (0 = 1e-10)")
	f.Uint64Var(&opt.Seed, "seed", 0, "random seed for the learner's random choices")
	f.StringVar(&opt.Out, "out", "", "output model file (.safetensors); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	return c
}

// hasBiases reports whether a model file's network carries any bias.
func hasBiases(m *nn.MLP) bool {
	if m == nil {
		return false
	}
	for _, l := range m.Layers {
		if l.Bias != nil {
			return true
		}
	}
	return false
}

// depth2EvalResult is what eval prints for depth-2 models with biases.
type depth2EvalResult struct {
	Command string `json:"command"`
	Model   string `json:"model"`
	Truth   string `json:"truth,omitempty"`
	D       int    `json:"d"`
	Hidden  int    `json:"hidden"`
	Outputs int    `json:"outputs"`
	// Weights compares parameters up to permutation and positive scaling;
	// WeightsSignFlip also allows the joint flip (w, b) → (−w, −b) of the
	// overcomplete case.
	Weights         *metrics.Depth2Error `json:"weights,omitempty"`
	WeightsSignFlip *metrics.Depth2Error `json:"weights_sign_flip,omitempty"`
	// L2 is E‖model(x) − truth(x)‖² under x ~ N(0, I) (closed form) and
	// RelL2 its square root relative to √E‖truth(x)‖².
	L2       *float64 `json:"l2,omitempty"`
	RelL2    *float64 `json:"rel_l2,omitempty"`
	Residual *float64 `json:"residual,omitempty"`
	Samples  int      `json:"samples,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// evalDepth2 is eval for models with biases (learn depth2, gen depth2).
func (a *app) evalDepth2(modelPath, truthPath string, model *nn.MLP, df dataFlags, start time.Time) error {
	net, err := depth2.FromMLP(model)
	if err != nil {
		return inputErrorf("--model %s: %v", modelPath, err)
	}
	res := depth2EvalResult{Command: "eval", Model: modelPath, Truth: truthPath, D: net.In(), Hidden: net.Hidden(), Outputs: net.Out()}
	if truthPath != "" {
		truth, _, err := nn.LoadModel(truthPath)
		if err != nil {
			return fmt.Errorf("reading --truth: %w", err)
		}
		tn, err := depth2.FromMLP(truth)
		if err != nil {
			return inputErrorf("--truth %s: %v", truthPath, err)
		}
		if tn.In() != net.In() || tn.Out() != net.Out() {
			return inputErrorf("--model maps %d inputs to %d outputs but --truth maps %d to %d; they must match", net.In(), net.Out(), tn.In(), tn.Out())
		}
		wrap := func(err error) error {
			for _, s := range []error{metrics.ErrShape, metrics.ErrNotFinite, metrics.ErrZeroRow, metrics.ErrNotDepth2} {
				if errors.Is(err, s) {
					return inputErrorf("%v", err)
				}
			}
			return err
		}
		e, err := metrics.CompareDepth2(truth, model, false)
		if err != nil {
			return wrap(err)
		}
		ef, err := metrics.CompareDepth2(truth, model, true)
		if err != nil {
			return wrap(err)
		}
		l2, err := metrics.L2Depth2(model, truth)
		if err != nil {
			return wrap(err)
		}
		zero := &nn.MLP{Layers: []nn.Layer{
			{Weight: mat.NewDense(1, net.In(), nil), Bias: []float64{0}, Act: nn.ReLU},
			{Weight: mat.NewDense(net.Out(), 1, nil), Bias: make([]float64, net.Out()), Act: nn.Identity},
		}}
		norm, err := metrics.L2Depth2(truth, zero)
		if err != nil {
			return wrap(err)
		}
		rel := math.Sqrt(l2 / norm)
		res.Weights, res.WeightsSignFlip, res.L2, res.RelL2 = &e, &ef, &l2, &rel
	}
	if df.given() {
		x, y, err := df.read()
		if err != nil {
			return err
		}
		n, xd := x.Dims()
		_, yp := y.Dims()
		if xd != net.In() || yp != net.Out() {
			return inputErrorf("the model maps %d inputs to %d outputs but the data has X with %d columns and Y with %d", net.In(), net.Out(), xd, yp)
		}
		r := metrics.RelResidual(y, model.Forward(x))
		res.Residual, res.Samples = &r, n
	}
	res.Seconds = time.Since(start).Seconds()
	return a.emit(res, func(w io.Writer) {
		rows := [][2]string{{"model", fmt.Sprintf("%s (d=%d, %d hidden units with biases, %d outputs)", modelPath, res.D, res.Hidden, res.Outputs)}}
		if res.Weights != nil {
			e, ef := res.Weights, res.WeightsSignFlip
			match := fmt.Sprintf("%v (truth unit i ↔ model unit perm[i])", e.Perm)
			if e.Missing > 0 || e.Extra > 0 {
				match += fmt.Sprintf("; %d truth units unmatched, %d model units extra", e.Missing, e.Extra)
			}
			rows = append(rows,
				[2]string{"truth", truthPath},
				[2]string{"max parameter error", fmt.Sprintf("%.3g (w %.3g, b %.3g, a %.3g, output bias %.3g)", e.MaxErr, e.MaxErrW, e.MaxErrB, e.MaxErrA, e.MaxErrC)},
				[2]string{"  … up to sign flips", fmt.Sprintf("%.3g", ef.MaxErr)},
				[2]string{"unit matching", match},
				[2]string{"L2 distance", fmt.Sprintf("E‖f − g‖² = %.3g (relative √: %.3g)", *res.L2, *res.RelL2)})
		}
		if res.Residual != nil {
			rows = append(rows, [2]string{"relative residual", fmt.Sprintf("%.3g on %d samples", *res.Residual, res.Samples)})
		}
		rows = append(rows, [2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
		table(w, rows)
	})
}
