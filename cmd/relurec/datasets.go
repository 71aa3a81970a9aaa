package main

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// datasetFashionMNIST is the name --data accepts for Fashion-MNIST.
const datasetFashionMNIST = "fashion-mnist"

// isNamedDataset reports whether --data names a built-in data set rather
// than a file.
func isNamedDataset(s string) bool { return s == datasetFashionMNIST }

// labeledSplits returns the training and test splits of a labelled data set:
// "fashion-mnist" (the Debian package's files; pixels scaled to [0, 1]) or an
// .npz file holding inputs xName (n×d) and integer labels yName (n×1); a file
// has no test split (test is nil). inputs lists the files read, for the
// manifest. xName "test-only" skips reading the training split of a named
// data set.
func labeledSplits(spec, xName, yName string) (train, test *dataio.Labeled, inputs []string, err error) {
	if spec == datasetFashionMNIST {
		dir := dataio.FashionMNISTPath("")
		if err := dataio.FashionMNISTAvailable(""); err != nil {
			return nil, nil, nil, err
		}
		if xName != "test-only" {
			if train, err = dataio.LoadFashionMNIST("", "train"); err != nil {
				return nil, nil, nil, err
			}
		}
		if test, err = dataio.LoadFashionMNIST("", "test"); err != nil {
			return nil, nil, nil, err
		}
		for _, f := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
			inputs = append(inputs, filepath.Join(dir, f))
		}
		return train, test, inputs, nil
	}
	x, err := dataio.ReadMatrix(spec, xName)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading %s: %w", xName, err)
	}
	y, err := dataio.ReadMatrix(spec, yName)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading labels %s: %w", yName, err)
	}
	if err := dataio.CheckFinite(xName, x); err != nil {
		return nil, nil, nil, err
	}
	l, err := toLabeled(x, y, yName)
	if err != nil {
		return nil, nil, nil, err
	}
	return l, nil, []string{spec}, nil
}

// toLabeled checks that y is an n×1 column of non-negative integers and
// pairs it with x.
func toLabeled(x, y *mat.Dense, yName string) (*dataio.Labeled, error) {
	nx, _ := x.Dims()
	ny, cy := y.Dims()
	if cy != 1 || ny != nx {
		return nil, inputErrorf("labels %s are %d×%d; expected one integer class per row of X (%d×1)", yName, ny, cy, nx)
	}
	labels := make([]int, ny)
	classes := 0
	for i := range labels {
		v := y.At(i, 0)
		if !(v >= 0) || v != math.Trunc(v) || v > 1e6 {
			return nil, inputErrorf("label %d is %v; labels must be integers 0, 1, 2, …", i, v)
		}
		labels[i] = int(v)
		classes = max(classes, labels[i]+1)
	}
	return &dataio.Labeled{X: x, Labels: labels, Classes: classes}, nil
}
