package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/synth"
)

const genDepth2Long = `Generate a random depth-2 teacher y = A·ReLU(W·x + b) (+ c) in the "B-bounded"
normalisation of Awasthi, Tang and Vijayaraghavan: unit rows w_i, biases
uniform in [−bias-max, bias-max], output weights of magnitude uniform in
[a-min, a-max] with random signs. --m may exceed --d (the overcomplete case,
learnable up to m ≤ d(d+1)/2 with --order 2). Inputs X are standard Gaussian
(n×d); Y is n×outputs, with optional noise whose standard deviation is
--noise times the RMS of the clean outputs.

Outputs as for gen twolayer: one .npz (--out), X.npy and Y.npy in a directory
(--out DIR/), or --x and --y; --model-out writes the teacher as safetensors (or ONNX for .onnx)
(PyTorch keys 0.weight, 0.bias, 2.weight, 2.bias). A run manifest is written
next to every output.`

const genDepth2Example = `  # The reference instance of docs/depth2.md: d=10, m=5, |b| ≤ 1, |a| ∈ [0.5, 2], 1e6 noiseless samples
  relurec gen depth2 --d 10 --m 5 --n 1000000 --seed 1 --out data.npz --model-out teacher.safetensors

  # Overcomplete: 7 units in 4 dimensions, kept apart, separate files
  relurec gen depth2 --d 4 --m 7 --min-separation 0.3 --n 1000000 --x X.npy --y Y.npy

  # Noisy, three outputs with output biases
  relurec gen depth2 --outputs 3 --output-bias --noise 0.1 --out noisy/`

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
	if err := checkNoiseKind(g.NoiseKind, g.Noise); err != nil {
		return err
	}
	var mem genMemory
	mem.samples(g.N, g.D, g.M, g.Outputs)
	return mem.check("use a smaller --n, --d, --m or --outputs")
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

// genDepth2Outputs are the output flags of gen depth2.
type genDepth2Outputs struct {
	out, x, y, model string
}

// genDepth2Result is what gen depth2 prints.
type genDepth2Result struct {
	Command    string    `json:"command"`
	Options    depth2Gen `json:"options"`
	Outputs    []string  `json:"outputs"`
	XShape     [2]int    `json:"x_shape"`
	YShape     [2]int    `json:"y_shape"`
	NoiseSigma float64   `json:"noise_sigma"`
	Seconds    float64   `json:"seconds"`
}

func newGenDepth2Cmd(a *app) *cobra.Command {
	g := depth2Gen{D: 10, M: 5, Outputs: 1, N: 100_000, BiasMax: 1, AMin: 0.5, AMax: 2, NoiseKind: "gaussian", Seed: 1}
	var o genDepth2Outputs
	c := &cobra.Command{
		Use:     "depth2",
		Short:   "Generate data from a random depth-2 ReLU network with biases, y = A·ReLU(W·x + b) (+ noise)",
		Long:    genDepth2Long,
		Example: genDepth2Example,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runGenDepth2(&g, o)
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
	f.StringVar(&o.out, "out", "", "output .npz (X and Y), or a directory ending in / for X.npy and Y.npy")
	f.StringVar(&o.x, "x", "", "write X to this .npy (with --y, instead of --out)")
	f.StringVar(&o.y, "y", "", "write Y to this .npy (with --x, instead of --out)")
	f.StringVar(&o.model, "model-out", "", "also write the teacher network to this file (.safetensors or .onnx)")
	return c
}

// runGenDepth2 is gen depth2: validate the flags and outputs, generate,
// write every output (all or nothing) and print.
func (a *app) runGenDepth2(g *depth2Gen, o genDepth2Outputs) error {
	start := time.Now()
	if err := g.validate(); err != nil {
		return err
	}
	files, err := genOutputs(o.out, o.x, o.y)
	if err != nil {
		return err
	}
	if err := checkGenOutputs(files, o.model); err != nil {
		return err
	}
	gen, err := g.generate()
	if err != nil {
		return a.magnitudeError(err)
	}
	if err := a.checkGenerated(gen.teacher, map[string]*mat.Dense{"X": gen.x, "Y": gen.y}); err != nil {
		return err
	}
	if err := a.context().Err(); err != nil {
		return err // Ctrl-C during generation: write nothing
	}
	genTime := time.Since(start)
	man := dataio.NewManifest("gen depth2", a.args)
	man.Version = relurecVersion()
	man.Options = *g
	man.Seed = g.Seed
	man.Timings["generate"] = genTime.Seconds()
	man.Results = map[string]any{"noise_sigma": gen.sigma}
	if err := a.makeGenDir(files); err != nil {
		return err
	}
	written, err := a.writeAll(man, g.outFiles(files, o.model, gen, func() {
		man.Timings["write"] = time.Since(start).Seconds() - genTime.Seconds()
	}))
	if err != nil {
		return err
	}
	res := genDepth2Result{"gen depth2", *g, written, dims(gen.x), dims(gen.y), gen.sigma, time.Since(start).Seconds()}
	return a.emit(res, func(w io.Writer) { table(w, genDepth2Rows(res, files, o.model)) })
}

// outFiles lists what gen depth2 writes: X and Y (one .npz or two .npy),
// then the teacher. wrote is called after each file.
func (g *depth2Gen) outFiles(files genFiles, modelOut string, gen *generated, wrote func()) []outFile {
	after := func(err error) error {
		if err == nil {
			wrote()
		}
		return err
	}
	var outs []outFile
	if files.x == files.y {
		outs = append(outs, outFile{files.x, func(p string) error {
			return after(dataio.WriteNPZ(p, map[string]*mat.Dense{"X": gen.x, "Y": gen.y}))
		}})
	} else {
		outs = append(outs,
			outFile{files.x, func(p string) error { return after(dataio.WriteNPY(p, gen.x)) }},
			outFile{files.y, func(p string) error { return after(dataio.WriteNPY(p, gen.y)) }})
	}
	if modelOut != "" {
		outs = append(outs, outFile{modelOut, func(p string) error {
			return after(saveNetwork(modelOut, p, gen.teacher, g.metadata(), ""))
		}})
	}
	return outs
}

// metadata is the teacher model file's provenance.
func (g *depth2Gen) metadata() map[string]string {
	return map[string]string{
		"producer": "relurec gen depth2", "relurec_version": relurecVersion(), "generator": "synth.Depth2Teacher",
		"d": strconv.Itoa(g.D), "m": strconv.Itoa(g.M), "outputs": strconv.Itoa(g.Outputs),
		"bias_max": strconv.FormatFloat(g.BiasMax, 'g', -1, 64), "seed": strconv.FormatUint(g.Seed, 10),
	}
}

// genDepth2Rows is gen depth2's human table.
func genDepth2Rows(res genDepth2Result, files genFiles, modelOut string) [][2]string {
	g := res.Options
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
		noise = fmt.Sprintf("%s, level %g (σ = %.3g)", g.NoiseKind, g.Noise, res.NoiseSigma)
	}
	return append(rows,
		[2]string{"noise", noise},
		[2]string{"seed", strconv.FormatUint(g.Seed, 10)},
		[2]string{"manifests", manifestList(res.Outputs)},
		[2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
}
