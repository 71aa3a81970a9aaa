package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/nn"
)

// cnnCalibImages is compress's default number of calibration images for a
// CNN (--calib-samples not given): every image is pushed through the
// network twice (original and compressed stream), which costs about 1 ms
// per image here for the Fashion-MNIST example, and the first Linear of
// that network (1568 inputs) needs well over 1568 rows for its fit.
const cnnCalibImages = 4096

// runCompressCNN is compress for a convolutional network (compress.
// CompressCNN): every Conv2d and Linear compressed to low rank, a conv on
// its unfolded patches and written back as a KH×KW conv to r channels then
// a 1×1 conv. The flags are compress's; --holdout is not taken (with
// --data the test accuracy is reported instead), and without
// --calib-samples cnnCalibImages images calibrate.
func (a *app) runCompressCNN(cmd *cobra.Command, opt compressOptions, net *nn.CNN, start time.Time) error {
	if err := net.Validate(); err != nil {
		return inputErrorf("--model %s: %v", opt.Model, err)
	}
	return a.runCompressNetwork(cmd, opt, net, "CNN", fmt.Sprintf("%v images", net.Input), cnnCalibImages, start,
		func(ctx context.Context, x *mat.Dense, copt compress.Options) (*compressedNetwork, error) {
			res, err := compress.CompressCNN(ctx, net, x, copt)
			if err != nil {
				return nil, err
			}
			return &compressedNetwork{res: res.Result, modules: res.Modules, model: res.Model, unit: "images",
				save: func(p string, meta map[string]string, dtype string) error {
					if strings.EqualFold(filepath.Ext(opt.Out), extONNX) {
						return nn.SaveCNNONNX(p, res.Model, meta, dtype)
					}
					return nn.SaveCNNModel(p, res.Model, meta, dtype)
				}}, nil
		}, printCompressCNN)
}

// compressedNetwork is what a CNN's or a graph's compression hands to
// runCompressNetwork: the evidence, the per-module data, the compressed
// network and how to write it.
type compressedNetwork struct {
	res     compress.Result
	modules any
	model   nn.Network
	save    func(path string, meta map[string]string, dtype string) error
	// unit names the calibration samples in the metadata ("images").
	unit string
}

// networkCompressJSON is compress's --json object for a CNN or a graph:
// jsonsafe skips an embedded unexported struct, so compressResult's fields
// are spelled out.
type networkCompressJSON struct {
	Command string `json:"command"`
	compress.Result
	Modules    any                `json:"modules"`
	Original   *nn.Metrics        `json:"original,omitempty"`
	Compressed *nn.Metrics        `json:"compressed,omitempty"`
	Seconds    float64            `json:"seconds"`
	Timings    map[string]float64 `json:"timings"`
	Options    compressOptions    `json:"options"`
	Out        string             `json:"out"`
	Manifest   string             `json:"manifest"`
}

// runCompressNetwork is compress for a network other than an MLP (kind
// "CNN" or "graph"): --holdout is refused (with --data the test accuracy
// is reported instead), without --calib-samples calibDefault samples
// calibrate (shape describes one for errors); run compresses, print
// writes the human table.
func (a *app) runCompressNetwork(cmd *cobra.Command, opt compressOptions, net nn.Network, kind, shape string, calibDefault int, start time.Time,
	run func(ctx context.Context, x *mat.Dense, copt compress.Options) (*compressedNetwork, error),
	print func(w io.Writer, out *compressResult, modules any, compressTime time.Duration)) error {
	if opt.Holdout != "" {
		return usageErrorf("--holdout is not available for a %s (per-layer held-out errors are computed for MLPs); --data fashion-mnist reports test accuracy", kind)
	}
	if !cmd.Flags().Changed("calib-samples") {
		opt.CalibSamples = calibDefault
	}
	in := &compressInputs{files: []string{opt.Model}}
	if err := opt.readCalibration(a.context(), in); err != nil {
		return err
	}
	in.holdout = nil // the test images: accuracy, not per-layer errors
	if _, d := in.calib.Dims(); d != net.In() {
		return inputErrorf("the calibration data has %d columns but the model takes %d inputs (%s)", d, net.In(), shape)
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
	cn, err := run(cmd.Context(), in.calib, copt)
	clear()
	if err != nil {
		return err
	}
	res := &cn.res
	compressTime := time.Since(cstart)
	out := compressResult{Command: "compress", Result: *res, Options: opt, Out: opt.Out, Manifest: dataio.ManifestPath(opt.Out)}
	evalStart := time.Now()
	if in.test != nil {
		if net.Out() != in.test.Classes {
			return inputErrorf("the model has %d outputs but %s has %d classes", net.Out(), opt.Data, in.test.Classes)
		}
		o, err := net.Evaluate(in.test.X, in.test.Labels)
		if err != nil {
			return err
		}
		c, err := cn.model.Evaluate(in.test.X, in.test.Labels)
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
		"layers": res.Layers, "modules": cn.modules, "warnings": res.Warnings, "original": out.Original, "compressed": out.Compressed,
	})
	meta := out.metadata()
	meta["calibration"] = fmt.Sprintf("%d %s", res.CalibrationRows, cn.unit)
	dtype := strings.ToUpper(opt.DType)
	if _, err := a.writeAll(man, []outFile{{path: opt.Out, write: func(p string) error {
		t := time.Now()
		if err := cn.save(p, meta, dtype); err != nil {
			return fmt.Errorf("writing the model: %w", err)
		}
		out.Timings["write"] = time.Since(t).Seconds()
		return nil
	}}}); err != nil {
		return err
	}
	out.Seconds = time.Since(start).Seconds()
	obj := networkCompressJSON{Command: out.Command, Result: out.Result, Modules: cn.modules, Original: out.Original, Compressed: out.Compressed,
		Seconds: out.Seconds, Timings: out.Timings, Options: out.Options, Out: out.Out, Manifest: out.Manifest}
	return a.emit(obj, func(w io.Writer) { print(w, &out, cn.modules, compressTime) })
}

// printCompressCNN is printCompress with one line per compressed module
// saying what it was fit on.
func printCompressCNN(w io.Writer, out *compressResult, modules any, compressTime time.Duration) {
	fmt.Fprintf(w, "CNN: %d calibration images; layer = module index, a conv's in = in channels·KH·KW\n", out.CalibrationRows)
	printCompress(w, out, compressTime)
	fmt.Fprintln(w)
	for _, m := range modules.([]compress.CNNModule) {
		if m.Kind == "conv2d" {
			fmt.Fprintf(w, "module %d  conv %d×%d: fit on %d of its %d patch rows\n", m.Module, m.Kernel[0], m.Kernel[1], m.Rows, m.Patches)
		} else {
			fmt.Fprintf(w, "module %d  linear: fit on %d rows\n", m.Module, m.Rows)
		}
	}
}
