package train_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// Example trains a 4-16-3 classifier on the labels a random teacher
// network gives, then distils a smaller 4-4-3 student from its logits.
func Example() {
	teacher, _ := nn.NewMLP([]int{4, 8, 3}, 1)
	rng := rand.New(rand.NewPCG(2, 3))
	x := mat.NewDense(1000, 4, nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = rng.NormFloat64()
	}
	labels := teacher.Predict(x)

	net, _ := nn.NewMLP([]int{4, 16, 3}, 4)
	if _, err := train.MLP(context.Background(), net, x, labels, train.Options{Epochs: 20, LearningRate: 1e-2, Seed: 5}); err != nil {
		panic(err)
	}
	met, _ := net.Evaluate(x, labels)
	fmt.Printf("trained: accuracy %.2f\n", met.Accuracy)

	student, _ := nn.NewMLP([]int{4, 4, 3}, 6)
	res, err := train.Distill(context.Background(), student, x, net.Forward(x), train.DistillOptions{
		Options: train.Options{Epochs: 20, LearningRate: 1e-2, Seed: 7}, Temperature: 2})
	if err != nil {
		panic(err)
	}
	last := res.Epochs[len(res.Epochs)-1]
	fmt.Printf("distilled: agrees with the trained network on %.2f of the inputs\n", last.TrainAccuracy)
	// Output:
	// trained: accuracy 0.95
	// distilled: agrees with the trained network on 0.97 of the inputs
}
