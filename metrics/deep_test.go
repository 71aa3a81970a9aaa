package metrics

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// CompareMLP sees through each hidden layer's permutation and positive
// scaling (zero error), measures a perturbation relative to the tensor's
// largest entry, and refuses networks of different shapes.
func TestCompareMLPSymmetriesAndErrors(t *testing.T) {
	truth, err := nn.NewMLP([]int{5, 4, 3, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	est := truth.Clone()
	// Permute layer 1's units (rows of layer 0, columns of layer 1) and
	// scale them by positive factors; the same for layer 2.
	perm := func(l int, p []int, s []float64) {
		W, b := est.Layers[l].Weight, est.Layers[l].Bias
		next := est.Layers[l+1].Weight
		W0, b0, n0 := mat.DenseCopyOf(W), append([]float64(nil), b...), mat.DenseCopyOf(next)
		_, c := W0.Dims()
		rows, _ := n0.Dims()
		for i, j := range p {
			for k := 0; k < c; k++ {
				W.Set(i, k, W0.At(j, k)*s[i])
			}
			b[i] = b0[j] * s[i]
			for r := 0; r < rows; r++ {
				next.Set(r, i, n0.At(r, j)/s[i])
			}
		}
	}
	perm(0, []int{2, 0, 3, 1}, []float64{2, 0.5, 3, 1.5})
	perm(1, []int{1, 2, 0}, []float64{0.25, 4, 1})
	got, err := CompareMLP(truth, est)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxRel > 1e-14 || len(got.Layers) != 3 {
		t.Fatalf("symmetric copy: %+v", got)
	}
	// An output bias moved by 1e-6 (biases of the output layer are not
	// rescaled): exactly 1e-6 over the largest output bias, in that
	// tensor only.
	est.Layers[2].Bias[1] += 1e-6
	got, _ = CompareMLP(truth, est)
	bmax := math.Max(math.Abs(truth.Layers[2].Bias[0]), math.Abs(truth.Layers[2].Bias[1]))
	if l := got.Layers[2]; math.Abs(l.RelB-1e-6/bmax) > 1e-9 || l.RelW > 1e-14 || got.MaxRel != l.RelB || got.Layers[0].RelW > 1e-14 {
		t.Errorf("perturbed: %+v", got.Layers)
	}
	other, _ := nn.NewMLP([]int{5, 3, 3, 2}, 1)
	if _, err := CompareMLP(truth, other); !errors.Is(err, ErrShape) {
		t.Errorf("shapes differ: err %v", err)
	}
}
