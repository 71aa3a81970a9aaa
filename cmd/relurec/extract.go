package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/extract"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/internal/safefile"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

const extractLong = `Extract a ReLU network y = A·ReLU(W·x + b) + c, or one with more hidden layers
(Linear, ReLU, Linear, ReLU, …, Linear), from queries alone: the model is a black
box that answers inputs with outputs. The queries locate the kinks of the
piecewise-linear function along random lines and measure the jump of its
Jacobian across each (the critical-point approach of the cryptanalytic
extraction literature, Carlini, Jagielski, Mironov 2020), then resolve the units'
signs and the output layer by least squares (package extract). A deeper network
is extracted layer by layer, each layer checked before the next: the first
layer's units are the kinks whose critical set is a hyperplane; the later layers
are searched on inputs where every known unit is active, in the space of the
previous layer's outputs; the last of three or more, region by region over the
previous layer's activation patterns. Two hidden layers are extracted
(784-64-32-10 in seconds); three on some networks only (a failed one exits 3).
A model computing in float32 with two hidden layers needs its widths (--hidden
32,16): with them some networks come back to float32 accuracy in minutes.
The answer is certified by its relative residual on fresh Gaussian queries
(several hidden layers: and on inputs where every weight between hidden units
acts, which Gaussian queries can miss).

The model answers either in-process, from a file (--teacher: a .safetensors or
.onnx nn.Sequential of Linear layers with ReLU between them; relurec only calls
it, and then also reports the parameter error against it), or from another
process (--query-cmd; --hidden gives the depth, e.g. --hidden 32,16 or 0,0):
the command is started once with sh -c, and each batch of queries is one .npy
array (n×d, float64) on its stdin, answered by one .npy array (n×outputs) on its
stdout. In Python:

    import sys, numpy as np
    from numpy.lib import format
    class Pipe:                   # numpy reads a real file object with fromfile,
        def __init__(self, f):    # which cannot seek on a pipe; give it read only
            self.read = f.read
    stdin = Pipe(sys.stdin.buffer)
    while True:
        try:
            X = format.read_array(stdin)
        except ValueError:        # end of input
            break
        format.write_array(sys.stdout.buffer, model(X)); sys.stdout.buffer.flush()

The command runs in a process group of its own, which extract always ends.
Each batch must be read and answered within --query-timeout (default 5m, which
covers the command's start-up too). A reply that is late, is not a .npy array,
or announces a shape other than queries × outputs (or one beyond --max-memory)
is refused after its header, and the command's whole group is killed: extract
exits 2, writing nothing. At
the end the command's stdin is closed; still running a second later, it gets
SIGTERM, and its group SIGKILL within another second. An interrupt kills the
group at once.

The extracted model is written like learn's (safetensors with 0.weight, 0.bias,
2.weight, 2.bias, … or ONNX), with the query count in its metadata. The report
gives the units found and the queries (per layer for a deeper network), the
time and the peak memory; progress is shown on a terminal.

--checkpoint FILE logs the model's answers as they come (the queries are not
stored, only a hash of each batch): an extraction is deterministic given its
options and the answers, so the same command rerun after an interrupt or a crash
sends the same batches, takes those the file holds from it, and asks the model
only the rest; the report says how many queries were replayed. Its result and
query counts are the uninterrupted run's. A missing FILE is created; one written
for another extraction (another --teacher file or --query-cmd command, --d,
--seed, --hidden, --cert-tol or --max-lines) exits 2 and is left as it was. The
command, not what it serves, names a --query-cmd model: give a server whose model
changed a new checkpoint. --max-queries may differ between runs (a budget-stopped
run resumes with a larger budget). A finished run keeps its checkpoint, which
replays the whole run without a query; delete it when done.

An extraction whose certificate is not met (units missed, a query budget that
ran out, an oracle whose rounding defeats the search) exits with status 3 and
writes nothing; the message says how many units were found (of --hidden, when
given) and the certificate's residual. --approximate writes the model anyway
(exit status still 3).`

const extractExample = `  # A model file you hold (the query count is what an attacker would need)
  relurec extract --teacher mlp.onnx --out extracted.safetensors

  # A model served by another process; d inputs must be given
  relurec extract --query-cmd 'python3 serve.py' --d 784 --out extracted.safetensors

  # A slow model: allow each batch 30 minutes (start-up included)
  relurec extract --query-cmd 'python3 serve.py' --d 784 --query-timeout 30m --out extracted.safetensors

  # Known width, a query budget
  relurec extract --teacher mlp.safetensors --hidden 64 --max-queries 500000 --out extracted.onnx

  # Two hidden layers (784-64-32-10): the depth comes from the file (the widths
  # are searched), or from --hidden for a served model (0 = width not known)
  relurec extract --teacher mlp2.safetensors --out extracted2.safetensors
  relurec extract --query-cmd 'python3 serve.py' --d 784 --hidden 64,32 --out extracted2.safetensors

  # A long extraction that survives Ctrl-C or a crash: rerun the same command
  # to resume (the answers logged so far are not asked again)
  relurec extract --query-cmd 'python3 serve.py' --d 784 --checkpoint run.ckpt --out extracted.safetensors

  # Keep what a budget-stopped extraction found (exit status 3 all the same)
  relurec extract --teacher mlp.onnx --max-queries 50000 --approximate --out partial.safetensors`

// extractOptions are extract's flags, as recorded in the manifest.
type extractOptions struct {
	Teacher  string `json:"teacher,omitempty"`
	QueryCmd string `json:"query_cmd,omitempty"`
	D        int    `json:"d,omitempty"`
	// queryTimeout bounds each batch of --query-cmd; it does not change
	// the result, so the manifest leaves it out.
	queryTimeout time.Duration
	// hidden is --hidden as given: one width, or one per hidden layer.
	hidden string
	// checkpoint is --checkpoint: where the model's answers are logged
	// and replayed from; it does not change the result.
	checkpoint string
	extract.Options
	Out         string `json:"out"`
	DType       string `json:"dtype"`
	Approximate bool   `json:"approximate"`
}

// extractResult is what extract prints and stores in the manifest.
type extractResult struct {
	Command string `json:"command"`
	Out     string `json:"out"`
	D       int    `json:"d"`
	Outputs int    `json:"outputs"`
	// The extraction's report (extract.Result without the model).
	Units   int `json:"units"`
	Queries int `json:"queries"`
	Calls   int `json:"calls"`
	Lines   int `json:"lines"`
	Kinks   int `json:"kinks"`
	// Hidden is --hidden, the units expected (0: not given), and Widths
	// the widths per hidden layer for a deeper network.
	Hidden int   `json:"hidden,omitempty"`
	Widths []int `json:"widths,omitempty"`
	// Layers reports each hidden layer of a deeper network: units found,
	// queries, lines, and its check.
	Layers      []extract.LayerResult `json:"layers,omitempty"`
	Certificate certify.Certificate   `json:"certificate"`
	Diagnostics extract.Diagnostics   `json:"diagnostics"`
	// Outcome: warnings and notes, and whether the model was written.
	Outcome
	// Weights compares the extracted parameters with the teacher's (up to
	// permutation and positive scaling) when --teacher was given.
	Weights *metrics.Depth2Error `json:"weights,omitempty"`
	// LayerWeights is that comparison for a deeper network, per layer.
	LayerWeights *metrics.MLPError `json:"layer_weights,omitempty"`
	Seconds      float64           `json:"seconds"`
	// PeakMemory is the process's peak resident set size in bytes (0:
	// unknown on this system).
	PeakMemory int64 `json:"peak_memory_bytes"`
	// Checkpoint reports --checkpoint.
	Checkpoint *checkpointReport `json:"checkpoint,omitempty"`
	Options    extractOptions    `json:"options"`
	Manifest   string            `json:"manifest"`
}

func newExtractCmd(a *app) *cobra.Command {
	opt := extractOptions{DType: "f64", queryTimeout: 5 * time.Minute}
	c := &cobra.Command{
		Use:     "extract",
		Short:   "Extract a ReLU network's weights from queries to it (a model file or a process)",
		Long:    extractLong,
		Example: extractExample,
		Args:    cobra.NoArgs,
		RunE: a.leaf(func(cmd *cobra.Command, _ []string) error {
			return a.runExtract(cmd, opt)
		}),
	}
	f := c.Flags()
	f.StringVar(&opt.Teacher, "teacher", "", "the model to query in-process (.safetensors or .onnx, Linear–ReLU–Linear)")
	f.StringVar(&opt.QueryCmd, "query-cmd", "", "a command answering .npy queries on stdin with .npy outputs on stdout (instead of --teacher)")
	f.IntVar(&opt.D, "d", 0, "input dimension (required with --query-cmd)")
	f.DurationVar(&opt.queryTimeout, "query-timeout", opt.queryTimeout, "how long --query-cmd may take to read and answer one batch of queries, e.g. 30s or 10m")
	f.StringVar(&opt.hidden, "hidden", "", "hidden units, if known (0 = search until the units found reproduce the model); for a deeper network one width per hidden layer, e.g. 32,16 (0,0: two hidden layers, widths not known)")
	f.IntVar(&opt.MaxQueries, "max-queries", 0, "query budget (0 = none)")
	f.IntVar(&opt.MaxLines, "max-lines", 0, "most random lines to search (0 = 64, or 160 for a model computing in float32)")
	f.Float64Var(&opt.CertTol, "cert-tol", 0, "relative residual on fresh queries that certifies the extraction (0 = 1e-10)")
	f.Uint64Var(&opt.Seed, "seed", 0, "random seed for the lines and the certificate's queries")
	f.StringVar(&opt.Out, "out", "", "output model file ("+modelFormatsHelp+"); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	f.BoolVar(&opt.Approximate, "approximate", false, approximateHelp)
	f.StringVar(&opt.checkpoint, "checkpoint", "", "a file logging the model's answers, created if missing: the same command rerun with it after an interrupt resumes the extraction, asking the model only what the file lacks")
	_ = f.SetAnnotation("hidden", optionAnnotation, []string{"Hidden", "Widths"})
	return c
}

// runExtract is extract: validate the flags, open the model's access
// (in-process teacher or query command), extract, write, print.
func (a *app) runExtract(cmd *cobra.Command, opt extractOptions) error {
	start := time.Now()
	if (opt.Teacher == "") == (opt.QueryCmd == "") {
		return usageErrorf("extract needs exactly one of --teacher (a model file) and --query-cmd (a command that answers queries)")
	}
	if opt.QueryCmd != "" && opt.D <= 0 {
		return usageErrorf("--query-cmd needs --d, the number of inputs the model takes")
	}
	if opt.queryTimeout <= 0 {
		return usageErrorf("--query-timeout is %v; expected a positive duration such as 30s or 5m", opt.queryTimeout)
	}
	widths, err := parseWidths(opt.hidden)
	if err != nil {
		return err
	}
	opt.Hidden, opt.Widths = 0, nil
	switch {
	case len(widths) == 1:
		opt.Hidden = widths[0]
	case len(widths) > 1:
		opt.Widths = widths
	}
	var inputs []string
	if opt.Teacher != "" {
		inputs = append(inputs, opt.Teacher)
	}
	if err := checkModelOut(&opt.DType, opt.Out, inputs...); err != nil {
		return err
	}
	man, err := a.newManifest("extract", opt, opt.Seed, inputs...)
	if err != nil {
		return err
	}
	ctx := a.context()
	oracle, teacher, d, q, err := openOracle(&opt)
	if err != nil {
		return err
	}
	defer q.kill() // on every early return; a no-op after finish
	eopt := opt.Options
	cp, err := openCheckpoint(&opt, d, inputs)
	if err != nil {
		return err
	}
	defer cp.Close() // on every early return, an interrupt's included
	eopt.Checkpoint = cp
	progress, clear := a.progress()
	eopt.Progress = progress
	res, err := extract.Extract(ctx, oracle, d, eopt)
	clear()
	if err != nil {
		if cp != nil && ctx.Err() != nil {
			fmt.Fprintf(a.stderr, "relurec: --checkpoint %s holds the answers to %d queries; the same command resumes from it\n", cp.Path(), cp.Logged())
		}
		return err
	}
	if err := cp.Close(); err != nil {
		return err
	}
	// The model is done with: the command ends before the outputs are
	// written, so that committing them is the command's last step.
	q.finish(ctx)
	out := extractResult{
		Command: "extract", Out: opt.Out, D: d, Outputs: res.Outputs, Hidden: opt.Hidden, Widths: opt.Widths, Layers: res.Layers,
		Units: res.Units, Queries: res.Queries, Calls: res.Calls, Lines: res.Lines, Kinks: res.Kinks,
		Certificate: res.Certificate, Diagnostics: res.Diagnostics,
		Options: opt, Manifest: dataio.ManifestPath(opt.Out),
	}
	if cp != nil {
		out.Checkpoint = &checkpointReport{File: cp.Path(), Replayed: res.Diagnostics.Replayed, Sent: cp.Sent(), Dropped: cp.Dropped()}
	}
	var notCertified error
	out.Outcome, notCertified = settle(res.Certificate, res.Warnings, opt.Approximate && res.Network != nil, out.finding(res.Warnings))
	model := res.Network
	switch {
	case teacher == nil || model == nil:
	case len(model.Layers) == 2:
		w, err := metrics.CompareDepth2(teacher, model, false)
		if err != nil {
			return err
		}
		out.Weights = &w
	default:
		// Widths that differ from the teacher's (units missed) leave
		// nothing to align.
		if w, err := metrics.CompareMLP(teacher, model); err == nil {
			out.LayerWeights = &w
		}
	}
	if out.Written {
		timings := map[string]float64{"extract": res.Elapsed.Seconds()}
		man.Timings = timings
		man.Results = jsonsafe.Finite(map[string]any{"queries": res.Queries, "units": res.Units, "certificate": res.Certificate, "weights": out.Weights, "diagnostics": res.Diagnostics, "warnings": res.Warnings})
		meta := map[string]string{
			"producer": "relurec extract", "relurec_version": relurecVersion(),
			"queries": strconv.Itoa(res.Queries), "hidden": hiddenMeta(res),
			"certificate_residual": strconv.FormatFloat(res.Certificate.Residual, 'g', -1, 64),
			"certificate_tol":      strconv.FormatFloat(res.Certificate.Tol, 'g', -1, 64),
			"certificate_met":      strconv.FormatBool(res.Certificate.Met),
			"seed":                 strconv.FormatUint(opt.Seed, 10),
		}
		if err := a.writeModel(man, opt.Out, model, meta, opt.DType, timings); err != nil {
			return err
		}
	} else {
		out.Manifest = ""
	}
	out.Seconds = time.Since(start).Seconds()
	out.PeakMemory = peakMemory()
	if err := a.emit(out, func(w io.Writer) { table(w, out.rows()) }); err != nil {
		return err
	}
	return notCertified
}

// finding says what an extraction found, for the message of one that is
// not certified: the units (of --hidden, when given), the queries and the
// extraction's warnings.
func (out *extractResult) finding(warnings []string) string {
	if len(out.Layers) > 0 {
		return fmt.Sprintf("The extraction found %s hidden units per layer on %d lines with %d queries: %s.",
			out.layerUnits(), out.Lines, out.Queries, strings.Join(warnings, "; "))
	}
	of := ""
	if out.Hidden > 0 {
		of = fmt.Sprintf(" of the %d given by --hidden", out.Hidden)
	}
	return fmt.Sprintf("The extraction found %d hidden units%s on %d lines with %d queries: %s.",
		out.Units, of, out.Lines, out.Queries, strings.Join(warnings, "; "))
}

// layerUnits lists a deeper network's units found per layer, with the
// widths given ("32, 16" or "32 of 32, 15 of 16").
func (out *extractResult) layerUnits() string {
	parts := make([]string, len(out.Layers))
	for i, l := range out.Layers {
		parts[i] = strconv.Itoa(l.Units)
		if l.Width > 0 {
			parts[i] = fmt.Sprintf("%d of %d", l.Units, l.Width)
		}
	}
	return strings.Join(parts, ", ")
}

// hiddenMeta is the model file's "hidden" metadata: the units, or the
// widths per layer of a deeper network ("32,16").
func hiddenMeta(res *extract.Result) string {
	if len(res.Layers) == 0 {
		return strconv.Itoa(res.Units)
	}
	parts := make([]string, len(res.Layers))
	for i, l := range res.Layers {
		parts[i] = strconv.Itoa(l.Units)
	}
	return strings.Join(parts, ",")
}

// parseWidths reads --hidden: empty, one width, or a comma-separated
// width per hidden layer.
func parseWidths(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, usageErrorf("--hidden %q: expected a width ≥ 0 (0 = not known), or one per hidden layer separated by commas, e.g. 32,16", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// openOracle is the model's access: the teacher file run in-process (also
// returned, to score the extraction) or the query command (q, nil for a
// teacher).
func openOracle(opt *extractOptions) (oracle extract.Oracle, teacher *nn.MLP, d int, q *queryCommand, err error) {
	if opt.Teacher != "" {
		teacher, _, err = loadNetwork(opt.Teacher)
		if err != nil {
			return nil, nil, 0, nil, inputErrorf("--teacher %s: %v", opt.Teacher, err)
		}
		if err := checkReLUMLP(teacher); err != nil {
			return nil, nil, 0, nil, inputErrorf("--teacher %s: %v", opt.Teacher, err)
		}
		// The depth is the file's; the widths are searched unless given.
		depth := len(teacher.Layers) - 1
		given := max(len(opt.Widths), 1)
		if opt.hidden != "" && given != depth {
			return nil, nil, 0, nil, usageErrorf("--hidden %s gives %d hidden layers; --teacher %s has %d", opt.hidden, given, opt.Teacher, depth)
		}
		if depth > 1 && len(opt.Widths) == 0 {
			opt.Widths = make([]int, depth)
		}
		return extract.FromMLP(teacher), teacher, teacher.Layers[0].In(), nil, nil
	}
	q, err = startQueryCommand(opt.QueryCmd, opt.queryTimeout)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	return q.query, nil, opt.D, q, nil
}

// checkReLUMLP accepts Linear–ReLU–…–Linear networks, the models extract
// recovers.
func checkReLUMLP(m *nn.MLP) error {
	ok := len(m.Layers) >= 2
	for i, l := range m.Layers {
		want := nn.ReLU
		if i == len(m.Layers)-1 {
			want = nn.Identity
		}
		ok = ok && l.Act == want
	}
	if !ok {
		acts := make([]string, len(m.Layers))
		for i, l := range m.Layers {
			acts[i] = string(l.Act)
		}
		return fmt.Errorf("extract recovers Linear–ReLU–…–Linear networks (ReLU after every Linear layer but the last); this one has %d layers with activations %v", len(m.Layers), acts)
	}
	return nil
}

// rows is extract's human table.
func (out *extractResult) rows() [][2]string {
	found := fmt.Sprintf("%d found on %d lines (%d kinks)", out.Units, out.Lines, out.Kinks)
	if out.Hidden > 0 {
		found = fmt.Sprintf("%d of %d found on %d lines (%d kinks)", out.Units, out.Hidden, out.Lines, out.Kinks)
	}
	rows := [][2]string{
		{"model", fmt.Sprintf("d=%d inputs, %d outputs", out.D, out.Outputs)},
		{"hidden units", found},
	}
	if len(out.Layers) > 0 {
		rows[1][1] = fmt.Sprintf("%s per layer on %d lines (%d kinks)", out.layerUnits(), out.Lines, out.Kinks)
		for i, l := range out.Layers {
			status := "passed"
			if !l.Passed {
				status = "failed"
			}
			rows = append(rows, [2]string{fmt.Sprintf("layer %d", i+1), fmt.Sprintf("%d units, %d queries, %d lines, %d kinks of later layers set aside; check %s: %s", l.Units, l.Queries, l.Lines, l.Deeper, status, l.Check)})
		}
	}
	rows = append(rows,
		[2]string{"queries", fmt.Sprintf("%d in %d calls (search %d, Jacobians %d, least-squares polish %d, certificate %d)", out.Queries, out.Calls, out.Diagnostics.QueriesSearch, out.Diagnostics.QueriesJacobian, out.Diagnostics.QueriesRefine, out.Diagnostics.QueriesCert)},
		[2]string{"certificate", fmt.Sprintf("%s on %d fresh queries", certificateText(out.Certificate), out.Certificate.Samples)})
	if w := out.Weights; w != nil {
		rows = append(rows, [2]string{"vs the teacher", fmt.Sprintf("max parameter error %.2e (W %.1e, b %.1e, A %.1e, c %.1e)", w.MaxErr, w.MaxErrW, w.MaxErrB, w.MaxErrA, w.MaxErrC)})
	}
	if w := out.LayerWeights; w != nil {
		var per []string
		for _, l := range w.Layers {
			per = append(per, fmt.Sprintf("%.1e", math.Max(l.RelW, l.RelB)))
		}
		rows = append(rows, [2]string{"vs the teacher", fmt.Sprintf("max relative parameter error %.2e after alignment (per layer %s)", w.MaxRel, strings.Join(per, ", "))})
	}
	if c := out.Checkpoint; c != nil {
		rows = append(rows, [2]string{"checkpoint", c.text()})
	}
	mem := "unknown"
	if out.PeakMemory > 0 {
		mem = fmt.Sprintf("%.0f MiB peak resident", float64(out.PeakMemory)/(1<<20))
	}
	rows = append(rows, [2]string{"memory", mem})
	return append(rows, out.Outcome.rows(fmt.Sprintf("%.2f s", out.Seconds), out.Out, out.Options.DType, out.Manifest)...)
}

// checkpointReport is what --checkpoint did: queries answered from the
// file, queries sent to the model (and logged), and the bytes of a torn
// last record dropped when it was opened.
type checkpointReport struct {
	File     string `json:"file"`
	Replayed int    `json:"replayed"`
	Sent     int    `json:"sent"`
	Dropped  int64  `json:"dropped_bytes,omitempty"`
}

func (c *checkpointReport) text() string {
	s := fmt.Sprintf("%s: %d queries replayed, %d sent to the model", c.File, c.Replayed, c.Sent)
	if c.Dropped > 0 {
		s += fmt.Sprintf(" (a torn last record of %d bytes dropped)", c.Dropped)
	}
	return s
}

// openCheckpoint opens --checkpoint (nil without it) for the extraction
// opt describes, the model named by its file's SHA-256 or by
// --query-cmd. The file may be none of the inputs and outputs.
func openCheckpoint(opt *extractOptions, d int, inputs []string) (*extract.Checkpoint, error) {
	if opt.checkpoint == "" {
		return nil, nil
	}
	if err := safefile.CheckWritable(opt.checkpoint); err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	for _, f := range append(inputs, opt.Out, dataio.ManifestPath(opt.Out)) {
		if dataio.CheckOutputNotInput(opt.checkpoint, f) != nil {
			return nil, usageErrorf("--checkpoint %s is the same file as %s, an input or output of this run; give the checkpoint a file of its own", opt.checkpoint, f)
		}
	}
	model := "query-cmd " + opt.QueryCmd
	if opt.Teacher != "" {
		b, err := os.ReadFile(opt.Teacher)
		if err != nil {
			return nil, inputErrorf("--teacher %s: %v", opt.Teacher, err)
		}
		model = fmt.Sprintf("teacher sha256:%x", sha256.Sum256(b))
	}
	return extract.OpenCheckpoint(opt.checkpoint, d, opt.Options, model)
}
