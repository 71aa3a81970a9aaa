package train

import (
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

// TestClassCountRefusesStrayLabels: one label of 1e6 must not size a network
// with a million outputs; the error names the label, its row and the option.
func TestClassCountRefusesStrayLabels(t *testing.T) {
	if c, err := (Options{}).ClassCount([]int{0, 2, 1}); err != nil || c != 3 {
		t.Fatalf("inferred: %d, %v; want 3", c, err)
	}
	if c, err := (Options{Classes: 10}).ClassCount([]int{0, 2, 1}); err != nil || c != 10 {
		t.Fatalf("explicit: %d, %v; want 10", c, err)
	}
	if c, err := (Options{Classes: 2000}).ClassCount([]int{0, 1999}); err != nil || c != 2000 {
		t.Fatalf("explicit beyond the inference cap: %d, %v; want 2000", c, err)
	}
	_, err := (Options{}).ClassCount([]int{0, 1, 2, 1000000})
	testutil.WantInputError(t, "stray label", err, "label 1000000 at row 3")
	testutil.WantInputError(t, "stray label names the option", err, "Options.Classes")
	_, err = (Options{Classes: 3}).ClassCount([]int{0, 3})
	testutil.WantInputError(t, "label ≥ Classes", err, "label 3 at row 1 is outside [0, 3) for Options.Classes = 3")
	_, err = (Options{}).ClassCount([]int{0, -1})
	testutil.WantInputError(t, "negative label", err, "label -1 at row 1 is negative")
	_, err = (Options{Classes: -2}).ClassCount([]int{0})
	testutil.WantInputError(t, "negative Classes", err, "Options.Classes must be ≥ 0")
	_, err = (Options{}).ClassCount(nil)
	testutil.WantInputError(t, "no labels", err, "no labels")
}

// TestMLPAndEvaluateRefuseBadArguments: nil inputs and a network whose
// output width disagrees with Options.Classes are errors, not panics.
func TestMLPAndEvaluateRefuseBadArguments(t *testing.T) {
	m, err := nn.NewMLP([]int{2, 3, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense(4, 2, []float64{1, 0, 0, 1, 1, 1, 0, 0})
	labels := []int{0, 1, 1, 0}
	_, err = MLP(t.Context(), m, nil, labels, Options{Epochs: 1})
	testutil.WantInputError(t, "Train nil x", err, "nil or empty")
	_, err = MLP(t.Context(), m, x, labels, Options{Epochs: 1, Classes: 3})
	testutil.WantInputError(t, "Train Classes ≠ outputs", err, "the network has 2 outputs but Options.Classes = 3")
	_, err = m.Evaluate(nil, labels)
	testutil.WantInputError(t, "Evaluate nil x", err, "nil or empty")
	_, err = (*nn.MLP)(nil).Evaluate(x, labels)
	testutil.WantInputError(t, "Evaluate nil network", err, "no layers")
	if _, err := MLP(t.Context(), m, x, labels, Options{Epochs: 1, Classes: 2}); err != nil {
		t.Fatalf("Train with matching Classes: %v", err)
	}
}
