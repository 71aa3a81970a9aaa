package dataio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
)

// ErrDatasetMissing marks a named data set whose files are not installed.
var ErrDatasetMissing = errs.New("data set not installed; run scripts/install-datasets.sh (Debian package dataset-fashion-mnist) or set RELUREC_FASHION_MNIST to the directory holding the IDX files", errs.ErrInput)

// FashionMNISTDir is where Debian's dataset-fashion-mnist package installs
// the four gzipped IDX files.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTEnv names the environment variable that overrides
// FashionMNISTDir.
const FashionMNISTEnv = "RELUREC_FASHION_MNIST"

// FashionMNISTClasses are the ten class names in label order.
var FashionMNISTClasses = []string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// Labeled is a classification data set: inputs as rows and one integer label
// per row in [0, Classes).
type Labeled struct {
	X       *mat.Dense
	Labels  []int
	Classes int
}

// Rows is the number of samples.
func (l *Labeled) Rows() int { r, _ := l.X.Dims(); return r }

// Head returns the first n samples (all of them if n ≤ 0 or n ≥ Rows), sharing
// memory with l.
func (l *Labeled) Head(n int) *Labeled {
	r, c := l.X.Dims()
	if n <= 0 || n >= r {
		return l
	}
	return &Labeled{X: l.X.Slice(0, n, 0, c).(*mat.Dense), Labels: l.Labels[:n], Classes: l.Classes}
}

// Slice returns samples [i, j), sharing memory with l.
func (l *Labeled) Slice(i, j int) *Labeled {
	_, c := l.X.Dims()
	return &Labeled{X: l.X.Slice(i, j, 0, c).(*mat.Dense), Labels: l.Labels[i:j], Classes: l.Classes}
}

// FashionMNISTPath returns the directory holding Fashion-MNIST: dir if not
// empty, else $RELUREC_FASHION_MNIST if set, else FashionMNISTDir.
func FashionMNISTPath(dir string) string {
	if dir != "" {
		return dir
	}
	if d := os.Getenv(FashionMNISTEnv); d != "" {
		return d
	}
	return FashionMNISTDir
}

// FashionMNISTAvailable reports whether the four Fashion-MNIST files are in
// FashionMNISTPath(dir), and if not, why.
func FashionMNISTAvailable(dir string) error {
	dir = FashionMNISTPath(dir)
	for _, name := range fashionFiles("train") {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("Fashion-MNIST: %s not found in %s: %w", name, dir, ErrDatasetMissing)
		}
	}
	for _, name := range fashionFiles("test") {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("Fashion-MNIST: %s not found in %s: %w", name, dir, ErrDatasetMissing)
		}
	}
	return nil
}

// fashionFiles gives the images and labels files of a split.
func fashionFiles(split string) [2]string {
	p := "t10k"
	if split == "train" {
		p = "train"
	}
	return [2]string{p + "-images-idx3-ubyte.gz", p + "-labels-idx1-ubyte.gz"}
}

// LoadFashionMNIST reads one split ("train": 60 000 images, "test": 10 000)
// of Fashion-MNIST (Xiao, Rasul, Vollgraf 2017) from FashionMNISTPath(dir).
// Images become rows of 784 pixels in row-major order scaled to [0, 1]
// (x/255, as torchvision's ToTensor does), labels integers 0…9 (see
// FashionMNISTClasses). Missing files give an error wrapping
// ErrDatasetMissing; corrupt ones an error wrapping ErrFormat.
func LoadFashionMNIST(dir, split string) (*Labeled, error) {
	if split != "train" && split != "test" {
		return nil, fmt.Errorf("Fashion-MNIST: unknown split %q; expected \"train\" or \"test\"", split)
	}
	dir = FashionMNISTPath(dir)
	files := fashionFiles(split)
	img, err := ReadIDXFile(filepath.Join(dir, files[0]))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("Fashion-MNIST: %s not found in %s: %w", files[0], dir, ErrDatasetMissing)
		}
		return nil, err
	}
	lab, err := ReadIDXFile(filepath.Join(dir, files[1]))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("Fashion-MNIST: %s not found in %s: %w", files[1], dir, ErrDatasetMissing)
		}
		return nil, err
	}
	if len(img.Dims) != 3 || img.Dims[1] != 28 || img.Dims[2] != 28 {
		return nil, fmt.Errorf("Fashion-MNIST: %s has dimensions %v, expected n×28×28: %w", files[0], img.Dims, ErrFormat)
	}
	if len(lab.Dims) != 1 || lab.Dims[0] != img.Dims[0] {
		return nil, fmt.Errorf("Fashion-MNIST: %s has dimensions %v but there are %d images: %w", files[1], lab.Dims, img.Dims[0], ErrFormat)
	}
	labels := make([]int, len(lab.Data))
	for i, v := range lab.Data {
		if v < 0 || v > 9 || v != float64(int(v)) {
			return nil, fmt.Errorf("Fashion-MNIST: label %d is %v, expected 0…9: %w", i, v, ErrFormat)
		}
		labels[i] = int(v)
	}
	for i := range img.Data {
		img.Data[i] /= 255
	}
	x, err := img.Matrix()
	if err != nil {
		return nil, err
	}
	return &Labeled{X: x, Labels: labels, Classes: 10}, nil
}

// isIDXPath reports whether path names an IDX file by the usual naming
// ("…-idx3-ubyte", "….idx", optionally ".gz").
func isIDXPath(path string) bool {
	p := strings.ToLower(strings.TrimSuffix(strings.ToLower(path), ".gz"))
	return strings.HasSuffix(p, "-ubyte") || strings.HasSuffix(p, ".idx")
}
