package compress

import (
	"context"
	"os"
	"testing"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/nn"
)

func TestZZProfGraph(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	g, err := nn.LoadGraphONNX("/tmp/vitX/vit.onnx")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := dataio.LoadFashionMNIST("", "train")
	if err != nil {
		t.Fatal(err)
	}
	x := tr.Head(2048).X
	o := DefaultOptions(g)
	o.Keep = 0.5
	res, err := CompressGraph(context.Background(), g, x, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Params)
}
