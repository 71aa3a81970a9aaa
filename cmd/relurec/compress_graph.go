package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/nn"
)

// graphCalibImages is compress's default number of calibration samples
// for a graph (--calib-samples not given): a mixer's MatMul sees 28–64
// rows per image, so 2048 images give far more rows than the GraphRows
// sample each weight is fit on.
const graphCalibImages = 2048

// graphCompressResult is what compress prints for a graph.
type graphCompressResult struct {
	compressResult
	Modules []compress.GraphModule `json:"modules"`
}

// graphCompressJSON is graphCompressResult for --json (see cnnCompressJSON).
type graphCompressJSON struct {
	Command string `json:"command"`
	compress.Result
	Modules    []compress.GraphModule `json:"modules"`
	Original   *nn.Metrics            `json:"original,omitempty"`
	Compressed *nn.Metrics            `json:"compressed,omitempty"`
	Seconds    float64                `json:"seconds"`
	Timings    map[string]float64     `json:"timings"`
	Options    compressOptions        `json:"options"`
	Out        string                 `json:"out"`
	Manifest   string                 `json:"manifest"`
}

// graphModel returns the model at path if it is an ONNX graph that is
// neither an MLP nor a sequential CNN (residual or mixer blocks), else
// nil (the MLP and CNN paths then read it and report their errors).
func graphModel(path string) *nn.Graph {
	if !strings.EqualFold(filepath.Ext(path), extONNX) {
		return nil
	}
	net, err := nn.LoadONNXNetwork(path)
	if err != nil {
		return nil
	}
	g, _ := net.(*nn.Graph)
	return g
}

// runCompressGraph is compress for an ONNX graph (compress.CompressGraph):
// every MatMul or Gemm by a constant weight compressed to low rank from
// the activations that reach it, written back as two MatMul nodes. The
// flags are compress's; --holdout is not taken, the output is ONNX, and
// without --calib-samples graphCalibImages samples calibrate.
func (a *app) runCompressGraph(cmd *cobra.Command, opt compressOptions, net *nn.Graph, start time.Time) error {
	if !strings.EqualFold(filepath.Ext(opt.Out), extONNX) {
		return usageErrorf("--out %s: a graph (residual or mixer blocks) is written as ONNX only; give a .onnx file", opt.Out)
	}
	if opt.Holdout != "" {
		return usageErrorf("--holdout is not available for a graph (per-layer held-out errors are computed for MLPs); --data fashion-mnist reports test accuracy")
	}
	if !cmd.Flags().Changed("calib-samples") {
		opt.CalibSamples = graphCalibImages
	}
	in := &compressInputs{files: []string{opt.Model}}
	if err := opt.readCalibration(a.context(), in); err != nil {
		return err
	}
	in.holdout = nil // the test images: accuracy, not per-layer errors
	if _, d := in.calib.Dims(); d != net.In() {
		return inputErrorf("the calibration data has %d columns but the model takes %d inputs (samples of shape %v)", d, net.In(), net.InputShape)
	}
	man, err := a.newManifest("compress", &opt, 0, in.files...)
	if err != nil {
		return err
	}
	readTime := time.Since(start)

	progress, clear := a.progress()
	cstart := time.Now()
	copt := opt.library(nil)
	copt.Progress = progress
	res, err := compress.CompressGraph(cmd.Context(), net, in.calib, copt)
	clear()
	if err != nil {
		return err
	}
	compressTime := time.Since(cstart)
	out := graphCompressResult{
		compressResult: compressResult{Command: "compress", Result: res.Result, Options: opt, Out: opt.Out, Manifest: dataio.ManifestPath(opt.Out)},
		Modules:        res.Modules,
	}
	evalStart := time.Now()
	if in.test != nil {
		if net.Out() != in.test.Classes {
			return inputErrorf("the model has %d outputs but %s has %d classes", net.Out(), opt.Data, in.test.Classes)
		}
		o, err := net.Evaluate(in.test.X, in.test.Labels)
		if err != nil {
			return err
		}
		c, err := res.Model.Evaluate(in.test.X, in.test.Labels)
		if err != nil {
			return err
		}
		out.Original, out.Compressed = &o, &c
	}
	out.Timings = map[string]float64{
		"read":     readTime.Seconds(),
		"compress": compressTime.Seconds(),
		"evaluate": time.Since(evalStart).Seconds(),
	}
	man.Timings = out.Timings
	man.Results = jsonsafe.Finite(map[string]any{
		"params": res.Params, "dense_params": res.DenseParams, "budget": res.Budget, "kept": res.Kept,
		"layers": res.Layers, "modules": res.Modules, "warnings": res.Warnings, "original": out.Original, "compressed": out.Compressed,
	})
	meta := out.metadata()
	meta["calibration"] = fmt.Sprintf("%d samples", res.CalibrationRows)
	dtype := strings.ToUpper(opt.DType)
	if _, err := a.writeAll(man, []outFile{{path: opt.Out, write: func(p string) error {
		t := time.Now()
		err := nn.SaveGraphONNX(p, res.Model, meta, dtype)
		if err != nil {
			return fmt.Errorf("writing the model: %w", err)
		}
		out.Timings["write"] = time.Since(t).Seconds()
		return nil
	}}}); err != nil {
		return err
	}
	out.Seconds = time.Since(start).Seconds()
	c := &out.compressResult
	obj := graphCompressJSON{Command: c.Command, Result: c.Result, Modules: out.Modules, Original: c.Original, Compressed: c.Compressed,
		Seconds: c.Seconds, Timings: c.Timings, Options: c.Options, Out: c.Out, Manifest: c.Manifest}
	return a.emit(obj, func(w io.Writer) { printCompressGraph(w, &out, compressTime) })
}

// printCompressGraph is printCompress with one line per compressed weight
// saying what it was fit on.
func printCompressGraph(w io.Writer, out *graphCompressResult, compressTime time.Duration) {
	fmt.Fprintf(w, "graph: %d calibration samples; layer = node index, each weight fit on the rows of the activations that reach it\n", out.CalibrationRows)
	printCompress(w, &out.compressResult, compressTime)
	fmt.Fprintln(w)
	for _, m := range out.Modules {
		fmt.Fprintf(w, "node %s  weight %s: fit on %d of its %d rows\n", m.Node, m.Weight, m.Rows, m.Total)
	}
}
