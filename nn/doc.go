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
// Models are stored as safetensors with nn.Sequential key names ("0.weight",
// "0.bias", "2.weight", …), so PyTorch loads them with
// model.load_state_dict(safetensors.torch.load_file(path)), and LoadModel
// reads state dicts PyTorch saved. The architecture goes into the header's
// __metadata__ (MetaArchitecture); callers add provenance keys. F64 is the
// default dtype so that exactly recovered weights survive a round trip.
//
// Canonical is the one normalisation of results used across the project:
// unit incoming rows, units sorted by the norm of their outgoing weights.
package nn
