package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// twoLayerGen is a synthetic two-layer problem: teacher shape and
// conditioning, sample count, input covariance and noise.
type twoLayerGen struct {
	D         int     `json:"d"`
	K         int     `json:"k"`
	M         int     `json:"m"`
	N         int     `json:"n"`
	CondV     float64 `json:"cond_v"`
	CondU     float64 `json:"cond_u"`
	CovCond   float64 `json:"cov_cond"`
	NoiseKind string  `json:"noise_kind"`
	Noise     float64 `json:"noise"`
	Seed      uint64  `json:"seed"`
	// Activation is the teacher's hidden activation (gen twolayer --activation).
	Activation string `json:"activation,omitempty"`
	// Special holds the --instance flags of gen twolayer (gen_instances.go);
	// nil elsewhere.
	Special *instanceGen `json:"special,omitempty"`
}

// register adds the problem flags with the given defaults.
func (g *twoLayerGen) register(c *cobra.Command, withCov bool) {
	f := c.Flags()
	f.IntVar(&g.D, "d", g.D, "input dimension d (columns of X)")
	f.IntVar(&g.K, "k", g.K, "hidden units k (k ≤ min(d, m) for the tensor and ICA routes; k > m is learned by the FPT route, which needs n ≥ 4·d·2^k)")
	f.IntVar(&g.M, "m", g.M, "output dimension m (columns of Y)")
	f.IntVar(&g.N, "n", g.N, "number of samples (rows of X and Y)")
	f.Float64Var(&g.Noise, "noise", g.Noise, "noise σ relative to the RMS of the clean outputs (0 = noiseless)")
	f.Uint64Var(&g.Seed, "seed", g.Seed, "random seed; the same seed gives the same teacher and data")
	if withCov {
		f.Float64Var(&g.CondV, "cond-v", g.CondV, "condition number of the hidden weights V (0 = generator default)")
		f.Float64Var(&g.CondU, "cond-u", g.CondU, "condition number of the output weights U (0 = generator default)")
		f.Float64Var(&g.CovCond, "cov-cond", g.CovCond, "condition number of a random input covariance (1 = identity)")
		f.StringVar(&g.NoiseKind, "noise-kind", g.NoiseKind, "noise distribution when --noise > 0: gaussian or subgaussian")
	}
}

func (g *twoLayerGen) validate() error {
	for _, v := range []struct {
		name string
		val  int
	}{{"d", g.D}, {"k", g.K}, {"m", g.M}, {"n", g.N}} {
		if v.val < 1 {
			return usageErrorf("--%s must be at least 1, got %d", v.name, v.val)
		}
	}
	if g.K > g.D {
		return usageErrorf("--k %d exceeds --d %d: the hidden weights V (k×d) must have rank k", g.K, g.D)
	}
	for _, v := range []struct {
		name string
		val  float64
	}{{"cond-v", g.CondV}, {"cond-u", g.CondU}} {
		if math.IsNaN(v.val) || v.val < 0 || (v.val > 0 && v.val < 1) {
			return usageErrorf("--%s must be ≥ 1 (or 0 for the default), got %g", v.name, v.val)
		}
	}
	if math.IsNaN(g.CovCond) || g.CovCond < 1 {
		return usageErrorf("--cov-cond must be ≥ 1, got %g", g.CovCond)
	}
	if math.IsNaN(g.Noise) || math.IsInf(g.Noise, 0) || g.Noise < 0 {
		return usageErrorf("--noise must be a finite level ≥ 0, got %g", g.Noise)
	}
	if err := checkNoiseKind(g.NoiseKind, g.Noise); err != nil {
		return err
	}
	if _, err := parseActivationFlag(g.Activation); err != nil {
		return err
	}
	return g.checkMemory()
}

// checkMemory refuses, before anything is drawn, a gen twolayer run whose
// arrays would not fit the memory budget: X, the hidden layer, Y and the
// teacher, and the work matrices of the conditioned draws (each random
// orthogonal matrix takes four of its size, the input covariance four
// more); an --instance has shapes of its own.
func (g *twoLayerGen) checkMemory() error {
	if g.Special.active() {
		return g.Special.checkMemory(g.N)
	}
	var mem genMemory
	mem.samples(g.N, g.D, g.K, g.M)
	if g.CondV > 0 {
		mem.add(4*8*(sq(g.D)+sq(g.K)), "the orthogonal factors of V (--cond-v)")
	}
	if g.CondU > 0 {
		mem.add(4*8*(sq(g.M)+sq(g.K)), "the orthogonal factors of U (--cond-u)")
	}
	if g.CovCond > 1 {
		mem.add(8*8*sq(g.D), "the input covariance (--cov-cond)")
	}
	return mem.check("use a smaller --n, --d, --k or --m")
}

// sq is n², in float64 so that no flag value overflows it.
func sq(n int) float64 { return float64(n) * float64(n) }

// genMemory adds up what a gen command will allocate, item by item, for
// one dataio.CheckMemory before anything is drawn.
type genMemory struct {
	bytes float64
	items []string
}

// add counts bytes for the item named what.
func (m *genMemory) add(bytes float64, what string) {
	m.bytes += bytes
	m.items = append(m.items, what)
}

// matrix counts a rows × cols float64 matrix.
func (m *genMemory) matrix(name string, rows, cols int) {
	m.add(8*float64(rows)*float64(cols), fmt.Sprintf("%s (%d × %d)", name, rows, cols))
}

// samples counts the arrays of a two-layer teacher's data: X (n × d), the
// hidden layer (n × k), Y (n × m) and the teacher's weights.
func (m *genMemory) samples(n, d, k, outputs int) {
	m.matrix("X", n, d)
	m.matrix("the hidden layer", n, k)
	m.matrix("Y", n, outputs)
	m.add(8*float64(k)*(float64(d)+float64(outputs)), "the teacher")
}

// check refuses the total when it exceeds the memory budget (--max-memory);
// fix names the flags that ask for less.
func (m *genMemory) check(fix string) error {
	return dataio.CheckMemory(m.bytes, strings.Join(m.items, ", "), fix)
}

func (g *twoLayerGen) noise() synth.Noise {
	if g.Noise == 0 {
		return synth.Noise{Kind: "none"}
	}
	return synth.Noise{Kind: g.NoiseKind, Level: g.Noise}
}

// generated is a teacher and its data.
type generated struct {
	teacher *nn.MLP
	x, y    *mat.Dense
	sigma   float64 // absolute noise standard deviation
}

// generate draws the problem (synth.DrawTwoLayerProblem: teacher, input
// covariance, X and Y from one seeded stream), so demo and gen give the same
// problem for the same flags.
func (g *twoLayerGen) generate() (*generated, error) {
	act, err := parseActivationFlag(g.Activation)
	if err != nil {
		return nil, err
	}
	p, err := synth.DrawTwoLayerProblem(synth.TwoLayerProblemConfig{
		Teacher:    synth.TwoLayerConfig{D: g.D, K: g.K, M: g.M, CondV: g.CondV, CondU: g.CondU},
		Activation: act, N: g.N, CovCond: g.CovCond, Noise: g.noise(),
	}, g.Seed)
	if err != nil {
		return nil, err
	}
	return &generated{teacher: p.Teacher, x: p.X, y: p.Y, sigma: p.Sigma}, nil
}

func (g *twoLayerGen) metadata() map[string]string {
	if g.Special.active() {
		return map[string]string{
			"producer":        "relurec gen twolayer",
			"relurec_version": relurecVersion(),
			"generator":       map[string]string{instanceLemma16: "synth.Lemma16Pair", instanceSAT6: "synth.SATReduction witness"}[g.Special.Instance],
			"instance":        g.Special.Instance,
			"seed":            strconv.FormatUint(g.Seed, 10),
		}
	}
	return map[string]string{
		"producer":        "relurec gen twolayer",
		"relurec_version": relurecVersion(),
		"generator":       "synth.TwoLayerTeacher",
		"d":               strconv.Itoa(g.D),
		"k":               strconv.Itoa(g.K),
		"m":               strconv.Itoa(g.M),
		"cond_v":          strconv.FormatFloat(g.CondV, 'g', -1, 64),
		"cond_u":          strconv.FormatFloat(g.CondU, 'g', -1, 64),
		"seed":            strconv.FormatUint(g.Seed, 10),
	}
}

func newGenCmd(a *app) *cobra.Command {
	return groupCmd("gen", "Generate synthetic teachers and data",
		`  relurec gen twolayer --d 20 --k 5 --m 8 --n 100000 --seed 1 --out data.npz --model-out teacher.safetensors`,
		newGenTwoLayerCmd(a), newGenGenerativeCmd(a), newGenRobustCmd(a), newGenDepth2Cmd(a))
}

const genTwoLayerLong = `Generate a random two-layer teacher (V k×d with unit rows, U m×k, condition
numbers set by --cond-v/--cond-u), Gaussian inputs X (n×d, identity covariance
or a random one with condition number --cov-cond) and outputs Y (n×m), with
optional noise whose standard deviation is --noise times the RMS of the clean
outputs.

Outputs: X and Y go into one .npz (arrays "X" and "Y") given by --out, or
into X.npy and Y.npy inside a directory when --out ends with a path
separator (or is an existing directory), or into the files given by --x and
--y. --model-out also writes the teacher as safetensors (or ONNX for .onnx). A run manifest
(<output>.manifest.json) is written next to every output.

--instance lemma16 writes Gaussian X (n×2) and Y from the first network of
the lower-bound pair of Bakshi et al. Lemma 16 (or the second with --second);
the two agree on every sample with |x1| > 2a|x2|. --instance sat6 writes the
instance of their NP-hardness reduction (Thm 2) for a random reversible 6-SAT
formula with a planted solution; the teacher is the witness network
ReLU(X·Vᵀ)·[1,1]ᵀ that fits it exactly (rank(Y) = 1 < k = 2).`

const genTwoLayerExample = `  # 100 000 noiseless samples of a d=20, k=5, m=8 network, plus the teacher
  relurec gen twolayer --d 20 --k 5 --m 8 --n 100000 --seed 1 --out data.npz --model-out teacher.safetensors

  # Noisy data (σ = 10% of the output RMS), X.npy and Y.npy in a directory
  relurec gen twolayer --n 300000 --noise-kind gaussian --noise 0.1 --seed 2 --out noisy/

  # Correlated inputs, separate files
  relurec gen twolayer --cov-cond 10 --x X.npy --y Y.npy

  # The Lemma 16 lower-bound pair (κ = 1/a): data from the first network
  relurec gen twolayer --instance lemma16 --a 0.05 --n 200 --out lemma16.npz

  # The NP-hardness reduction of a planted reversible 6-SAT formula
  relurec gen twolayer --instance sat6 --vars 10 --clauses 8 --out sat6.npz --model-out witness.safetensors`

// genTwoLayerFlags are the output flags of gen twolayer.
type genTwoLayerFlags struct {
	out, xOut, yOut, modelOut string
}

func newGenTwoLayerCmd(a *app) *cobra.Command {
	g := twoLayerGen{D: 20, K: 5, M: 8, N: 100_000, CovCond: 1, NoiseKind: "gaussian", Seed: 1,
		Special: &instanceGen{Instance: instanceRandom, A: 0.1, Vars: 8, Clauses: 6}}
	var fl genTwoLayerFlags
	c := &cobra.Command{
		Use:     "twolayer",
		Short:   "Generate data from a random two-layer ReLU network Y = ReLU(X·Vᵀ)·Uᵀ (+ noise)",
		Long:    genTwoLayerLong,
		Example: genTwoLayerExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runGenTwoLayer(cmd, &g, fl)
		}),
	}
	g.register(c, true)
	g.Special.register(c)
	f := c.Flags()
	f.StringVar(&fl.out, "out", "", "output .npz (X and Y), or a directory ending in / for X.npy and Y.npy")
	f.StringVar(&fl.xOut, "x", "", "write X to this .npy (with --y, instead of --out)")
	f.StringVar(&fl.yOut, "y", "", "write Y to this .npy (with --x, instead of --out)")
	f.StringVar(&fl.modelOut, "model-out", "", "also write the teacher network to this file (.safetensors or .onnx)")
	f.StringVar(&g.Activation, "activation", "relu", "teacher's "+activationHelp)
	return c
}

// runGenTwoLayer is gen twolayer: validate, check the outputs, generate,
// write all or nothing, print.
func (a *app) runGenTwoLayer(cmd *cobra.Command, g *twoLayerGen, fl genTwoLayerFlags) error {
	start := time.Now()
	if err := g.Special.validate(cmd); err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return err
	}
	files, err := checkGenTwoLayerOutputs(fl)
	if err != nil {
		return err
	}
	var gen *generated
	var extra map[string]any
	if g.Special.active() {
		gen, extra, err = g.Special.generate(g)
	} else {
		gen, err = g.generate()
	}
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
	dataFiles, err := a.writeGenTwoLayer(g, files, fl.modelOut, gen, extra, start, genTime)
	if err != nil {
		return err
	}
	res := genResult{
		Command: "gen twolayer", Options: *g, Outputs: dataFiles,
		XShape: dims(gen.x), YShape: dims(gen.y), NoiseSigma: gen.sigma,
		Instance: extra, Seconds: time.Since(start).Seconds(),
	}
	return a.emit(res, func(w io.Writer) { printGenTwoLayer(w, g, files, fl.modelOut, gen, res) })
}

// checkGenTwoLayerOutputs resolves and checks the output paths before any
// work (checkGenOutputs).
func checkGenTwoLayerOutputs(fl genTwoLayerFlags) (genFiles, error) {
	files, err := genOutputs(fl.out, fl.xOut, fl.yOut)
	if err != nil {
		return files, err
	}
	return files, checkGenOutputs(files, fl.modelOut)
}

// magnitudeError is a generator's error from values beyond float64's range
// (synth.ErrNotFinite: a NaN or Inf it met; synth.ErrNotPositiveDefinite:
// a covariance too ill-conditioned to factor) as a usage error naming the
// flags given (extremeFlags); any other error as it is.
func (a *app) magnitudeError(err error) error {
	if errors.Is(err, synth.ErrNotFinite) || errors.Is(err, synth.ErrNotPositiveDefinite) {
		return a.beyondFloat64(err)
	}
	return err
}

// beyondFloat64 is the usage error for a generated value that float64 does
// not hold: cause, and the flags given that set the magnitudes.
func (a *app) beyondFloat64(cause error) error {
	return usageErrorf("%v: %s beyond what float64 holds; use less extreme values", cause, a.extremeFlags())
}

// checkGenerated refuses generated arrays or a teacher holding NaN or Inf,
// which flag values too extreme for float64 give (a huge noise level,
// weight range or exponent): a usage error naming the flags given
// (extremeFlags), so that gen never writes a non-finite value.
func (a *app) checkGenerated(teacher *nn.MLP, arrays map[string]*mat.Dense) error {
	for _, name := range slices.Sorted(maps.Keys(arrays)) {
		m := arrays[name]
		r, c := m.Dims()
		for i := 0; i < r; i++ {
			for j, v := range m.RawRowView(i)[:c] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return a.beyondFloat64(fmt.Errorf("the generated %s has %v at row %d, column %d", name, v, i, j))
				}
			}
		}
	}
	if teacher != nil {
		if err := teacher.Validate(); err != nil {
			return a.beyondFloat64(fmt.Errorf("the generated teacher: %w", err))
		}
	}
	return nil
}

// extremeFlags names the flags given to the running command that set
// magnitudes: its float flags and the string flags that carry numbers
// (--activation relupow<c>, --bias DENSITY:a,b), with their values.
func (a *app) extremeFlags() string {
	var given []string
	a.cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "float64" || f.Name == "activation" || f.Name == "bias" {
			given = append(given, "--"+f.Name+" "+f.Value.String())
		}
	})
	switch len(given) {
	case 0:
		return "the defaults take the values"
	case 1:
		return given[0] + " takes the values"
	}
	return strings.Join(given, ", ") + " take the values"
}

// checkGenOutputs checks the outputs of gen twolayer and gen depth2 with
// checkOutputs: X and Y (one .npz, two .npy, or a directory), the teacher,
// and every manifest, all writable and no two the same file. A directory
// that does not exist yet is created at the end (makeGenDir); then only its
// parent can be checked now.
func checkGenOutputs(files genFiles, modelOut string) error {
	outs := [][3]string{{"model-out", modelOut, ""}}
	switch {
	case files.dir != "":
		if _, err := os.Stat(files.dir); err != nil {
			parent := filepath.Dir(files.dir)
			if st, err := os.Stat(parent); err != nil || !st.IsDir() {
				return inputErrorf("--out %s: directory %s does not exist", files.dir, parent)
			}
			break
		}
		outs = append(outs, [3]string{"out", files.x, ""}, [3]string{"out", files.y, ""})
	case files.x == files.y:
		outs = append(outs, [3]string{"out", files.x, ""})
	default:
		outs = append(outs, [3]string{"x", files.x, ""}, [3]string{"y", files.y, ""})
	}
	if err := checkOutputs(nil, outs...); err != nil {
		return err
	}
	if modelOut != "" {
		return checkModelExt("model-out", modelOut)
	}
	return nil
}

// makeGenDir creates the output directory of the directory layout, if any;
// when this run created it and its outputs are then not committed, it is
// removed again (a directory left behind would be a partial output).
func (a *app) makeGenDir(files genFiles) error {
	if files.dir == "" {
		return nil
	}
	if _, err := os.Stat(files.dir); err == nil {
		return nil
	}
	if err := os.Mkdir(files.dir, 0o777); err != nil {
		return fmt.Errorf("creating %s: %w", files.dir, err)
	}
	a.staged.undo = append(a.staged.undo, func() { os.Remove(files.dir) })
	return nil
}

// writeGenTwoLayer writes X, Y (one .npz or two .npy), the teacher with
// --model-out, and their manifests, all or nothing; it returns the data
// files written.
func (a *app) writeGenTwoLayer(g *twoLayerGen, files genFiles, modelOut string, gen *generated, extra map[string]any, start time.Time, genTime time.Duration) ([]string, error) {
	man := dataio.NewManifest("gen twolayer", a.args)
	man.Version = relurecVersion()
	man.Options = *g
	man.Seed = g.Seed
	man.Timings["generate"] = genTime.Seconds()
	results := map[string]any{"noise_sigma": gen.sigma}
	if extra != nil {
		results["instance"] = extra
	}
	man.Results = results
	var outs []outFile
	if files.x == files.y {
		outs = append(outs, outFile{files.x, func(p string) error {
			return dataio.WriteNPZ(p, map[string]*mat.Dense{"X": gen.x, "Y": gen.y})
		}})
	} else {
		outs = append(outs,
			outFile{files.x, func(p string) error { return dataio.WriteNPY(p, gen.x) }},
			outFile{files.y, func(p string) error { return dataio.WriteNPY(p, gen.y) }})
	}
	if modelOut != "" {
		outs = append(outs, outFile{modelOut, func(p string) error { return saveNetwork(modelOut, p, gen.teacher, g.metadata(), "") }})
	}
	// The write time covers the data and model files, not the manifests.
	last := outs[len(outs)-1].write
	outs[len(outs)-1].write = func(p string) error {
		if err := last(p); err != nil {
			return err
		}
		man.Timings["write"] = time.Since(start).Seconds() - genTime.Seconds()
		return nil
	}
	if err := a.makeGenDir(files); err != nil {
		return nil, err
	}
	return a.writeAll(man, outs)
}

// printGenTwoLayer writes the human table of gen twolayer.
func printGenTwoLayer(w io.Writer, g *twoLayerGen, files genFiles, modelOut string, gen *generated, res genResult) {
	extra := res.Instance
	rows := [][2]string{}
	if files.x == files.y {
		rows = append(rows, [2]string{"data", fmt.Sprintf("%s  (X %d×%d, Y %d×%d)", files.x, res.XShape[0], res.XShape[1], res.YShape[0], res.YShape[1])})
	} else {
		rows = append(rows,
			[2]string{"X", fmt.Sprintf("%s  (%d×%d)", files.x, res.XShape[0], res.XShape[1])},
			[2]string{"Y", fmt.Sprintf("%s  (%d×%d)", files.y, res.YShape[0], res.YShape[1])})
	}
	if modelOut != "" {
		rows = append(rows, [2]string{"teacher", fmt.Sprintf("%s  (V %d×%d, U %d×%d)", modelOut, g.K, g.D, g.M, g.K)})
	}
	if g.Special.Instance == instanceLemma16 {
		rows = append(rows, [2]string{"instance", fmt.Sprintf("lemma16, a = %g (κ = %g); %d of %d samples distinguish the pair (expected %.3g)",
			extra["network_a"], extra["cond_v"], extra["distinguishing_samples"], g.N, float64(g.N)*extra["distinguish_prob"].(float64))})
	} else if g.Special.Instance == instanceSAT6 {
		rows = append(rows, [2]string{"instance", fmt.Sprintf("sat6, %d variables, %d clauses (closed under complementation), %d clause rows", g.Special.Vars, 2*g.Special.Clauses, extra["clause_rows"])})
	}
	noise := "none"
	if g.Noise > 0 {
		noise = fmt.Sprintf("%s, level %g (σ = %.3g)", g.NoiseKind, g.Noise, gen.sigma)
	}
	rows = append(rows,
		[2]string{"noise", noise},
		[2]string{"seed", strconv.FormatUint(g.Seed, 10)},
		[2]string{"manifests", manifestList(res.Outputs)},
		[2]string{"time", fmt.Sprintf("%.2f s", res.Seconds)})
	table(w, rows)
}

type genResult struct {
	Command    string         `json:"command"`
	Options    twoLayerGen    `json:"options"`
	Outputs    []string       `json:"outputs"`
	XShape     [2]int         `json:"x_shape"`
	YShape     [2]int         `json:"y_shape"`
	NoiseSigma float64        `json:"noise_sigma"`
	Instance   map[string]any `json:"instance,omitempty"`
	Seconds    float64        `json:"seconds"`
}

// genFiles says where gen writes X and Y (equal paths: one .npz).
type genFiles struct {
	x, y string
	dir  string // non-empty when writing into a directory (created if needed)
}

func genOutputs(out, xOut, yOut string) (genFiles, error) {
	switch {
	case out != "" && (xOut != "" || yOut != ""):
		return genFiles{}, usageErrorf("give either --out or --x and --y, not both")
	case out == "" && xOut == "" && yOut == "":
		return genFiles{}, usageErrorf("no output given: use --out DATA.npz, --out DIR/, or --x X.npy --y Y.npy")
	case out == "" && (xOut == "" || yOut == ""):
		return genFiles{}, usageErrorf("--x and --y go together: give both")
	case out == "":
		for _, p := range []string{xOut, yOut} {
			if !strings.EqualFold(filepath.Ext(p), ".npy") {
				return genFiles{}, usageErrorf("--x and --y must end in .npy, got %s", p)
			}
		}
		if dataio.CheckOutputNotInput(xOut, yOut) != nil {
			return genFiles{}, usageErrorf("--x and --y are the same file: %s", xOut)
		}
		return genFiles{x: xOut, y: yOut}, nil
	}
	isDir := strings.HasSuffix(out, "/") || strings.HasSuffix(out, string(filepath.Separator))
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		isDir = true
	}
	if isDir {
		return genFiles{x: filepath.Join(out, "X.npy"), y: filepath.Join(out, "Y.npy"), dir: filepath.Clean(out)}, nil
	}
	if !strings.EqualFold(filepath.Ext(out), ".npz") {
		return genFiles{}, usageErrorf("--out %s: expected a .npz file or a directory ending in /; for separate .npy files use --x and --y", out)
	}
	return genFiles{x: out, y: out}, nil
}

// checkNoiseKind checks --noise-kind (synth.Noise.Kind) and that it agrees
// with the --noise level.
func checkNoiseKind(kind string, level float64) error {
	switch kind {
	case synth.NoiseGaussian, synth.NoiseSubGaussian:
	case synth.NoiseNone:
		if level > 0 {
			return usageErrorf("--noise-kind none contradicts --noise %g", level)
		}
	default:
		return usageErrorf("--noise-kind must be gaussian, subgaussian or none, got %q", kind)
	}
	return nil
}
