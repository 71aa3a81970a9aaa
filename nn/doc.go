// Package nn holds relurec's network type and everything done to a network
// rather than learnt: the forward pass, the canonical form that removes the
// symmetries of ReLU units, and model files.
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
// channels, then 1×1). CNNs are read from and written to ONNX
// (ReadCNNONNX, WriteCNNONNX: Conv, Relu, MaxPool, Flatten, Gemm nodes as
// torch.onnx.export writes them) and safetensors (state-dict keys, the
// architecture under MetaCNN); ReadONNXNetwork and ReadNetwork return
// whichever kind a file holds.
//
// Models are stored as safetensors with nn.Sequential key names ("0.weight",
// "0.bias", "2.weight", …), so PyTorch loads them with
// model.load_state_dict(safetensors.torch.load_file(path)), and LoadModel
// reads state dicts PyTorch saved. The architecture goes into the header's
// __metadata__ (MetaArchitecture); callers add provenance keys. F64 is the
// default dtype so that exactly recovered weights survive a round trip.
//
// Canonical is the one normalisation of results used across the project:
// unit incoming rows, units sorted by the norm of their outgoing weights.
//
// The safetensors and ONNX readers are our own (ReadSafetensors checks
// every offset and shape before it allocates; protobuf.go decodes the wire
// format with bounds checks) rather than google.golang.org/protobuf:
// docs/files.md ("Why the readers are our own") gives the measured
// comparison. They are fuzzed by FuzzReadSafetensors and FuzzReadONNX.
package nn
