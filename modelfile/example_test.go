package modelfile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// ExampleSaveModel saves y = U·ReLU(V·x) as a PyTorch-compatible
// safetensors file and reads it back with its metadata.
func ExampleSaveModel() {
	V := mat.NewDense(2, 2, []float64{0, 2, 1, 0})
	U := mat.NewDense(1, 2, []float64{1, 3})
	net := nn.NewTwoLayer(V, U)

	dir, _ := os.MkdirTemp("", "modelfile-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	if err := modelfile.SaveModel(path, net, map[string]string{"route": "example"}, ""); err != nil {
		panic(err)
	}
	back, meta, err := modelfile.LoadModel(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(mat.Equal(back.Layers[1].Weight, net.Layers[1].Weight), meta["route"], meta["format"])
	// Output:
	// true example pt
}
