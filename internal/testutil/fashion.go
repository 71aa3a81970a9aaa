package testutil

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// FashionMNIST writes a small stand-in for Fashion-MNIST — the four gzipped
// IDX files, train rows in the train split and test rows in the test split,
// 28×28 uint8 images and labels 0…9 — into a new temporary directory and
// points RELUREC_FASHION_MNIST at it for the rest of the test, so that
// `--data fashion-mnist` and dataio.LoadFashionMNIST("", …) read it. Each
// image is its class's template plus noise, so a classifier can learn the
// labels. The files are the same for the same arguments.
func FashionMNIST(t testing.TB, train, test int) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(28, 28))
	var templates [10][784]float64
	for c := range templates {
		for p := range templates[c] {
			templates[c][p] = 255 * rng.Float64()
		}
	}
	for _, split := range []struct {
		prefix string
		n      int
	}{{"train", train}, {"t10k", test}} {
		images := make([]byte, split.n*784)
		labels := make([]byte, split.n)
		for i := range labels {
			c := rng.IntN(10)
			labels[i] = byte(c)
			for p := 0; p < 784; p++ {
				v := 0.7*templates[c][p] + 0.3*255*rng.Float64()
				images[i*784+p] = byte(v)
			}
		}
		writeIDX(t, filepath.Join(dir, split.prefix+"-images-idx3-ubyte.gz"), []uint32{uint32(split.n), 28, 28}, images)
		writeIDX(t, filepath.Join(dir, split.prefix+"-labels-idx1-ubyte.gz"), []uint32{uint32(split.n)}, labels)
	}
	t.Setenv("RELUREC_FASHION_MNIST", dir)
	return dir
}

// writeIDX writes a gzipped IDX file of unsigned bytes with the given dims.
func writeIDX(t testing.TB, path string, dims []uint32, data []byte) {
	t.Helper()
	var raw bytes.Buffer
	raw.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&raw, binary.BigEndian, d)
	}
	raw.Write(data)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(raw.Bytes())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
