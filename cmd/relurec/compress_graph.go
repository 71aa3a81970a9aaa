package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// graphCalibImages is compress's default number of calibration samples
// for a graph (--calib-samples not given): on the Fashion-MNIST ViTs of
// docs/compress.md 4096 images lost 0.2–0.7 points fewer than 2048 at keep
// 0.3 and 0.5 (more varied rows for the GraphRows sample each weight is
// fit on, and for distillation).
const graphCalibImages = 4096

// graphTarget is compress for an ONNX graph (compress.CompressGraph):
// every MatMul or Gemm by a constant weight compressed to low rank from
// the activations that reach it, written back as two MatMul nodes, then
// with --distill the factors fit to the graph's outputs. The output is
// ONNX, --holdout is not taken, and without --calib-samples
// graphCalibImages samples calibrate.
func graphTarget(net *nn.Graph, opt compressOptions) (*compressTarget, error) {
	if !strings.EqualFold(filepath.Ext(opt.Out), extONNX) {
		return nil, usageErrorf("--out %s: a graph (residual or mixer blocks) is written as ONNX only; give a .onnx file", opt.Out)
	}
	return &compressTarget{net: net, kind: "graph", distills: true, shape: fmt.Sprintf("samples of shape %v", net.InputShape), calibDefault: graphCalibImages, print: printCompressGraph,
		run: func(ctx context.Context, x *mat.Dense, copt compress.Options) (*compressedNetwork, error) {
			res, err := compress.CompressGraph(ctx, net, x, copt)
			if err != nil {
				return nil, err
			}
			return &compressedNetwork{res: res.Result, modules: res.Modules, model: res.Model, unit: "samples",
				save: func(p string, meta map[string]string, dtype string) error {
					return modelfile.SaveGraphONNX(p, res.Model, meta, dtype)
				}}, nil
		}}, nil
}

// printCompressGraph is printCompress with one line per compressed weight
// saying what it was fit on.
func printCompressGraph(w io.Writer, out *compressResult, compressTime time.Duration) {
	fmt.Fprintf(w, "graph: %d calibration samples; layer = node index, each weight fit on the rows of the activations that reach it\n", out.CalibrationRows)
	printCompress(w, out, compressTime)
	fmt.Fprintln(w)
	for _, m := range out.Modules.([]compress.GraphModule) {
		fmt.Fprintf(w, "node %s  weight %s: fit on %d of its %d rows\n", m.Node, m.Weight, m.Rows, m.Total)
	}
}
