package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/extract"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
)

const extractLong = `Extract a one-hidden-layer ReLU network y = A·ReLU(W·x + b) + c from
queries alone: the model is a black box that answers inputs with outputs. The
queries locate the kinks of the piecewise-linear function along random lines and
measure the jump of its Jacobian across each (the critical-point approach of the
cryptanalytic extraction literature, Carlini, Jagielski, Mironov 2020), then
resolve the units' signs and the output layer by least squares (package extract).
The answer is certified by its relative residual on fresh Gaussian queries.

The model answers either in-process, from a file (--teacher: a .safetensors or
.onnx nn.Sequential(Linear, ReLU, Linear); relurec only calls it, and then also
reports the parameter error against it), or from another process (--query-cmd):
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
2.weight, 2.bias, or ONNX), with the query count in its metadata. The report
gives the units found, the queries, the time and the peak memory; progress is
shown on a terminal.

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
	// Hidden is --hidden, the units expected (0: not given).
	Hidden      int                 `json:"hidden,omitempty"`
	Certificate certify.Certificate `json:"certificate"`
	Diagnostics extract.Diagnostics `json:"diagnostics"`
	// Outcome: warnings and notes, and whether the model was written.
	Outcome
	// Weights compares the extracted parameters with the teacher's (up to
	// permutation and positive scaling) when --teacher was given.
	Weights *metrics.Depth2Error `json:"weights,omitempty"`
	Seconds float64              `json:"seconds"`
	// PeakMemory is the process's peak resident set size in bytes (0:
	// unknown on this system).
	PeakMemory int64          `json:"peak_memory_bytes"`
	Options    extractOptions `json:"options"`
	Manifest   string         `json:"manifest"`
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
	f.IntVar(&opt.Hidden, "hidden", 0, "hidden units, if known (0 = search until the units found reproduce the model)")
	f.IntVar(&opt.MaxQueries, "max-queries", 0, "query budget (0 = none)")
	f.IntVar(&opt.MaxLines, "max-lines", 0, "most random lines to search (0 = 64, or 160 for a model computing in float32)")
	f.Float64Var(&opt.CertTol, "cert-tol", 0, "relative residual on fresh queries that certifies the extraction (0 = 1e-10)")
	f.Uint64Var(&opt.Seed, "seed", 0, "random seed for the lines and the certificate's queries")
	f.StringVar(&opt.Out, "out", "", "output model file ("+modelFormatsHelp+"); required")
	f.StringVar(&opt.DType, "dtype", opt.DType, "weight precision in the model file: f64 or f32")
	f.BoolVar(&opt.Approximate, "approximate", false, approximateHelp)
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
	oracle, teacher, d, q, err := openOracle(opt)
	if err != nil {
		return err
	}
	defer q.kill() // on every early return; a no-op after finish
	progress, clear := a.progress()
	eopt := opt.Options
	eopt.Progress = progress
	res, err := extract.Extract(ctx, oracle, d, eopt)
	clear()
	if err != nil {
		return err
	}
	// The model is done with: the command ends before the outputs are
	// written, so that committing them is the command's last step.
	q.finish(ctx)
	out := extractResult{
		Command: "extract", Out: opt.Out, D: d, Outputs: res.Outputs, Hidden: opt.Hidden,
		Units: res.Units, Queries: res.Queries, Calls: res.Calls, Lines: res.Lines, Kinks: res.Kinks,
		Certificate: res.Certificate, Diagnostics: res.Diagnostics,
		Options: opt, Manifest: dataio.ManifestPath(opt.Out),
	}
	var notCertified error
	out.Outcome, notCertified = settle(res.Certificate, res.Warnings, opt.Approximate && res.Model != nil, out.finding(res.Warnings))
	var model *nn.MLP
	if res.Model != nil {
		model = res.Model.MLP()
	}
	if teacher != nil && model != nil {
		w, err := metrics.CompareDepth2(teacher, model, false)
		if err != nil {
			return err
		}
		out.Weights = &w
	}
	if out.Written {
		timings := map[string]float64{"extract": res.Elapsed.Seconds()}
		man.Timings = timings
		man.Results = jsonsafe.Finite(map[string]any{"queries": res.Queries, "units": res.Units, "certificate": res.Certificate, "weights": out.Weights, "diagnostics": res.Diagnostics, "warnings": res.Warnings})
		meta := map[string]string{
			"producer": "relurec extract", "relurec_version": relurecVersion(),
			"queries": strconv.Itoa(res.Queries), "hidden": strconv.Itoa(res.Units),
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
	of := ""
	if out.Hidden > 0 {
		of = fmt.Sprintf(" of the %d given by --hidden", out.Hidden)
	}
	return fmt.Sprintf("The extraction found %d hidden units%s on %d lines with %d queries: %s.",
		out.Units, of, out.Lines, out.Queries, strings.Join(warnings, "; "))
}

// openOracle is the model's access: the teacher file run in-process (also
// returned, to score the extraction) or the query command (q, nil for a
// teacher).
func openOracle(opt extractOptions) (oracle extract.Oracle, teacher *nn.MLP, d int, q *queryCommand, err error) {
	if opt.Teacher != "" {
		teacher, _, err = loadNetwork(opt.Teacher)
		if err != nil {
			return nil, nil, 0, nil, inputErrorf("--teacher %s: %v", opt.Teacher, err)
		}
		if err := checkOneHiddenLayer(teacher); err != nil {
			return nil, nil, 0, nil, inputErrorf("--teacher %s: %v", opt.Teacher, err)
		}
		return extract.FromMLP(teacher), teacher, teacher.Layers[0].In(), nil, nil
	}
	q, err = startQueryCommand(opt.QueryCmd, opt.queryTimeout)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	return q.query, nil, opt.D, q, nil
}

// checkOneHiddenLayer accepts Linear–ReLU–Linear networks, the model extract
// recovers.
func checkOneHiddenLayer(m *nn.MLP) error {
	if len(m.Layers) != 2 || m.Layers[0].Act != nn.ReLU || m.Layers[1].Act != nn.Identity {
		acts := make([]string, len(m.Layers))
		for i, l := range m.Layers {
			acts[i] = string(l.Act)
		}
		return fmt.Errorf("extract recovers Linear–ReLU–Linear networks; this one has %d layers with activations %v", len(m.Layers), acts)
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
		{"queries", fmt.Sprintf("%d in %d calls (search %d, Jacobians %d, least-squares polish %d, certificate %d)", out.Queries, out.Calls, out.Diagnostics.QueriesSearch, out.Diagnostics.QueriesJacobian, out.Diagnostics.QueriesRefine, out.Diagnostics.QueriesCert)},
		{"certificate", certificateText(out.Certificate) + " on fresh Gaussian queries"},
	}
	if w := out.Weights; w != nil {
		rows = append(rows, [2]string{"vs the teacher", fmt.Sprintf("max parameter error %.2e (W %.1e, b %.1e, A %.1e, c %.1e)", w.MaxErr, w.MaxErrW, w.MaxErrB, w.MaxErrA, w.MaxErrC)})
	}
	mem := "unknown"
	if out.PeakMemory > 0 {
		mem = fmt.Sprintf("%.0f MiB peak resident", float64(out.PeakMemory)/(1<<20))
	}
	rows = append(rows, [2]string{"memory", mem})
	return append(rows, out.Outcome.rows(fmt.Sprintf("%.2f s", out.Seconds), out.Out, out.Options.DType, out.Manifest)...)
}
