package modelfile

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// TestTorchInterop is the Go half of examples/torch_roundtrip.py (its
// "selftest" command runs it with RELUREC_INTEROP_DIR set; it is skipped
// otherwise, so `go test` needs no Python). It writes relurec_model.safetensors
// (F64) and relurec_model_f32.safetensors with relurec_X.npy and the network's
// outputs relurec_Y.npy for PyTorch to check, and, when the directory holds
// torch_model.safetensors, torch_X.npy and torch_Y.npy saved by PyTorch,
// loads that model and checks that Forward reproduces PyTorch's outputs.
func TestTorchInterop(t *testing.T) {
	dir := os.Getenv("RELUREC_INTEROP_DIR")
	if dir == "" {
		t.Skip("set RELUREC_INTEROP_DIR (examples/torch_roundtrip.py selftest does) to run")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	// ReLU layer, factored layer (two Linear), ReLU layer, output.
	m := randMLP(rng, []int{5, 8, 3, 4, 2}, []nn.Activation{nn.ReLU, nn.Identity, nn.ReLU, nn.Identity})
	x := testutil.RandDense(rng, 200, 5)
	y := m.Forward(x)
	meta := map[string]string{"relurec.route": "interop-test"}
	if err := SaveModel(filepath.Join(dir, "relurec_model.safetensors"), m, meta, "F64"); err != nil {
		t.Fatal(err)
	}
	if err := SaveModel(filepath.Join(dir, "relurec_model_f32.safetensors"), m, meta, "F32"); err != nil {
		t.Fatal(err)
	}
	if err := dataio.WriteNPY(filepath.Join(dir, "relurec_X.npy"), x); err != nil {
		t.Fatal(err)
	}
	if err := dataio.WriteNPY(filepath.Join(dir, "relurec_Y.npy"), y); err != nil {
		t.Fatal(err)
	}

	tm := filepath.Join(dir, "torch_model.safetensors")
	if _, err := os.Stat(tm); err != nil {
		t.Log("no torch_model.safetensors; only wrote relurec's files")
		return
	}
	net, tmeta, err := LoadModel(tm)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := dataio.ReadMatrix(filepath.Join(dir, "torch_X.npy"), "")
	if err != nil {
		t.Fatal(err)
	}
	ty, err := dataio.ReadMatrix(filepath.Join(dir, "torch_Y.npy"), "")
	if err != nil {
		t.Fatal(err)
	}
	dev := testutil.MaxRelDiff(net.Forward(tx), ty)
	acts := make([]nn.Activation, len(net.Layers))
	for i, l := range net.Layers {
		acts[i] = l.Act
	}
	t.Logf("torch model: %d layers %v, metadata %v; relurec Forward vs torch: max relative deviation %.3g", len(net.Layers), acts, tmeta, dev)
	if dev > 1e-5 {
		t.Fatalf("relurec's Forward of the PyTorch model deviates by %g from PyTorch's outputs", dev)
	}
}
