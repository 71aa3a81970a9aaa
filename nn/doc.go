// Package nn holds relurec's network types and everything done to a network
// rather than learnt: the forward pass, evaluation as a classifier, the
// canonical form that removes the symmetries of ReLU units, and the
// gradients training needs. Training and distillation by Adam are package
// train's; reading and writing networks as files is package modelfile's.
//
// An MLP is a list of Layers, each act(x·Wᵀ + b) with W in PyTorch's
// nn.Linear layout (out × in) and samples as rows, so Forward maps an n×d
// matrix to an n×m one exactly as the equivalent torch.nn.Sequential does.
// A Linear layer with Identity activation followed by another Linear layer is
// how a factored (low-rank) layer is represented.
//
// A CNN is a sequential convolutional network — Conv2d, ReLULayer,
// MaxPool2d, Flatten and Linear modules in nn.Sequential order — in
// PyTorch's NCHW layout with one flattened image per row, so it maps n×In
// to n×Out like an MLP and both satisfy Network. A Conv2d is stored as its
// Out × (In·KH·KW) matrix and computed as Unfold(x)·Weightᵀ (im2col and one
// matrix multiply), so a conv layer is an MLP layer on its unfolded
// patches and a factored conv is two Conv2d modules in a row (KH×KW to r
// channels, then 1×1).
//
// A Graph is a network of ONNX operators (residual blocks, mixers, a ViT)
// evaluated in float64, one sample per row like the other two.
//
// Canonical is the one normalisation of results used across the project:
// unit incoming rows, units sorted by the norm of their outgoing weights.
package nn
