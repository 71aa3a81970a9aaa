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

// cnnCalibImages is compress's default number of calibration images for a
// CNN (--calib-samples not given): every image is pushed through the
// network twice (original and compressed stream), which costs about 1 ms
// per image here for the Fashion-MNIST example, and the first Linear of
// that network (1568 inputs) needs well over 1568 rows for its fit.
const cnnCalibImages = 4096

// cnnTarget is compress for a convolutional network (compress.
// CompressCNN): every Conv2d and Linear compressed to low rank, a conv on
// its unfolded patches and written back as a KH×KW conv to r channels then
// a 1×1 conv, to --out as ONNX or safetensors by its extension. --holdout
// is not taken (with --data the test accuracy is reported instead), and
// without --calib-samples cnnCalibImages images calibrate.
func cnnTarget(net *nn.CNN, opt compressOptions) (*compressTarget, error) {
	if err := net.Validate(); err != nil {
		return nil, inputErrorf("--model %s: %v", opt.Model, err)
	}
	return &compressTarget{net: net, kind: "CNN", shape: fmt.Sprintf("%v images", net.Input), calibDefault: cnnCalibImages, print: printCompressCNN,
		run: func(ctx context.Context, x *mat.Dense, copt compress.Options) (*compressedNetwork, error) {
			res, err := compress.CompressCNN(ctx, net, x, copt)
			if err != nil {
				return nil, err
			}
			return &compressedNetwork{res: res.Result, modules: res.Modules, model: res.Model, unit: "images",
				save: func(p string, meta map[string]string, dtype string) error {
					if strings.EqualFold(filepath.Ext(opt.Out), extONNX) {
						return modelfile.SaveCNNONNX(p, res.Model, meta, dtype)
					}
					return modelfile.SaveCNNModel(p, res.Model, meta, dtype)
				}}, nil
		}}, nil
}

// printCompressCNN is printCompress with one line per compressed module
// saying what it was fit on.
func printCompressCNN(w io.Writer, out *compressResult, compressTime time.Duration) {
	fmt.Fprintf(w, "CNN: %d calibration images; layer = module index, a conv's in = in channels·KH·KW\n", out.CalibrationRows)
	printCompress(w, out, compressTime)
	fmt.Fprintln(w)
	for _, m := range out.Modules.([]compress.CNNModule) {
		if m.Kind == compress.ModuleConv2d {
			fmt.Fprintf(w, "module %d  conv %d×%d: fit on %d of its %d patch rows\n", m.Module, m.Kernel[0], m.Kernel[1], m.Rows, m.Patches)
		} else {
			fmt.Fprintf(w, "module %d  linear: fit on %d rows\n", m.Module, m.Rows)
		}
	}
}
