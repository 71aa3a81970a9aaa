package nn

import (
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func wantInputError(t *testing.T, name string, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrInput) {
		t.Errorf("%s: got %v, want an error wrapping ErrInput", name, err)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: message %q does not say %q", name, err, want)
	}
}

// TestClassCountRefusesStrayLabels: one label of 1e6 must not size a network
// with a million outputs; the error names the label, its row and the option.
func TestClassCountRefusesStrayLabels(t *testing.T) {
	if c, err := (TrainOptions{}).ClassCount([]int{0, 2, 1}); err != nil || c != 3 {
		t.Fatalf("inferred: %d, %v; want 3", c, err)
	}
	if c, err := (TrainOptions{Classes: 10}).ClassCount([]int{0, 2, 1}); err != nil || c != 10 {
		t.Fatalf("explicit: %d, %v; want 10", c, err)
	}
	if c, err := (TrainOptions{Classes: 2000}).ClassCount([]int{0, 1999}); err != nil || c != 2000 {
		t.Fatalf("explicit beyond the inference cap: %d, %v; want 2000", c, err)
	}
	_, err := (TrainOptions{}).ClassCount([]int{0, 1, 2, 1000000})
	wantInputError(t, "stray label", err, "label 1000000 at row 3")
	wantInputError(t, "stray label names the option", err, "TrainOptions.Classes")
	_, err = (TrainOptions{Classes: 3}).ClassCount([]int{0, 3})
	wantInputError(t, "label ≥ Classes", err, "label 3 at row 1 is outside [0, 3) for TrainOptions.Classes = 3")
	_, err = (TrainOptions{}).ClassCount([]int{0, -1})
	wantInputError(t, "negative label", err, "label -1 at row 1 is negative")
	_, err = (TrainOptions{Classes: -2}).ClassCount([]int{0})
	wantInputError(t, "negative Classes", err, "TrainOptions.Classes must be ≥ 0")
	_, err = (TrainOptions{}).ClassCount(nil)
	wantInputError(t, "no labels", err, "no labels")
}

// TestTrainAndEvaluateRefuseBadArguments: nil inputs and a network whose
// output width disagrees with TrainOptions.Classes are errors, not panics.
func TestTrainAndEvaluateRefuseBadArguments(t *testing.T) {
	m, err := NewMLP([]int{2, 3, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := mat.NewDense(4, 2, []float64{1, 0, 0, 1, 1, 1, 0, 0})
	labels := []int{0, 1, 1, 0}
	_, err = Train(t.Context(), m, nil, labels, TrainOptions{Epochs: 1})
	wantInputError(t, "Train nil x", err, "nil or empty")
	_, err = Train(t.Context(), m, x, labels, TrainOptions{Epochs: 1, Classes: 3})
	wantInputError(t, "Train Classes ≠ outputs", err, "the network has 2 outputs but TrainOptions.Classes = 3")
	_, err = m.Evaluate(nil, labels)
	wantInputError(t, "Evaluate nil x", err, "nil or empty")
	_, err = (*MLP)(nil).Evaluate(x, labels)
	wantInputError(t, "Evaluate nil network", err, "no layers")
	if _, err := Train(t.Context(), m, x, labels, TrainOptions{Epochs: 1, Classes: 2}); err != nil {
		t.Fatalf("Train with matching Classes: %v", err)
	}
}

// TestCheckTwoLayer: the shapes NewTwoLayer does not check.
func TestCheckTwoLayer(t *testing.T) {
	V, U := mat.NewDense(3, 5, nil), mat.NewDense(2, 3, nil)
	if err := CheckTwoLayer(V, U); err != nil {
		t.Fatalf("valid pair: %v", err)
	}
	wantInputError(t, "nil V", CheckTwoLayer(nil, U), "V is nil")
	wantInputError(t, "nil U", CheckTwoLayer(V, nil), "U is nil; expected m×k with k = 3")
	wantInputError(t, "k mismatch", CheckTwoLayer(V, mat.NewDense(2, 4, nil)), "U has 4 columns but needs 3")
	wantInputError(t, "NaN", CheckTwoLayer(mat.NewDense(1, 1, []float64{math.NaN()}), mat.NewDense(1, 1, nil)), "NaN")
	if err := NewTwoLayer(V, U).Validate(); err != nil {
		t.Fatalf("NewTwoLayer of a checked pair does not validate: %v", err)
	}
}
