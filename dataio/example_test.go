package dataio_test

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// Example writes two arrays to an .npz archive (as numpy.savez would) and
// reads one back by name.
func Example() {
	dir, err := os.MkdirTemp("", "dataio-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "data.npz")

	X := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	Y := mat.NewDense(2, 1, []float64{0.5, -1})
	if err := dataio.WriteNPZ(path, map[string]*mat.Dense{"X": X, "Y": Y}); err != nil {
		panic(err)
	}

	got, err := dataio.ReadMatrix(path, "X")
	if err != nil {
		panic(err)
	}
	fmt.Println(mat.Formatted(got))

	_, err = dataio.ReadMatrix(path, "Z")
	fmt.Println(err != nil)

	bad := mat.NewDense(1, 2, []float64{1, 0})
	bad.Set(0, 1, bad.At(0, 1)/bad.At(0, 1)) // 0/0 = NaN
	fmt.Println(dataio.CheckFinite("X", bad))
	// Output:
	// ⎡1  2  3⎤
	// ⎣4  5  6⎦
	// true
	// X has NaN at row 0, column 1 (0-based): NaN and Inf values are not allowed; drop or impute those entries first
}
