// Package train fits the weights of package nn's networks by minibatch
// Adam: MLP trains a classifier on labels (softmax cross-entropy), Distill
// fits an MLP to a teacher's logits and DistillGraph chosen constants of a
// Graph, with early stopping on held-out rows. The networks, their forward
// passes and gradients are package nn's; what is done here is the loop that
// uses them, its options, and the losses it minimises. Results are
// bit-identical for the same seed, data and starting network at any
// GOMAXPROCS.
package train
