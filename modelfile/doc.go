// Package modelfile reads and writes networks as files: safetensors and
// ONNX, for each kind of network package nn has (MLP, CNN, Graph).
//
// MLPs are stored as safetensors with nn.Sequential key names ("0.weight",
// "0.bias", "2.weight", …), so PyTorch loads them with
// model.load_state_dict(safetensors.torch.load_file(path)), and LoadModel
// reads state dicts PyTorch saved. The architecture goes into the header's
// __metadata__ (MetaArchitecture); callers add provenance keys. F64 is the
// default dtype so that exactly recovered weights survive a round trip.
//
// CNNs are read from and written to ONNX (ReadCNNONNX, WriteCNNONNX: Conv,
// Relu, MaxPool, Flatten, Gemm nodes as torch.onnx.export writes them) and
// safetensors (state-dict keys, the architecture under MetaCNN); Graphs to
// and from ONNX (ReadGraphONNX, WriteGraphONNX). ReadONNXNetwork and
// ReadNetwork return whichever kind a file holds. Every Save function
// writes atomically (temporary file, then rename).
//
// A file holds one format for one kind of network, on top of the format's
// container code: safetensors.go and safetensors_write.go read and write
// the safetensors container, safetensors_mlp.go and safetensors_cnn.go map
// an MLP and a CNN onto it; protobuf.go and onnx_tensor.go decode ONNX's
// protobuf messages, onnx_graph.go the graph they form and the MLP built
// from it, onnx.go is the ONNX reader's entry and onnx_write.go the writer
// of an MLP, cnn_onnx.go and graph_onnx.go read and write a CNN and a
// Graph. file.go opens and atomically writes the files for all of them.
//
// The safetensors and ONNX readers are our own (ReadSafetensors checks
// every offset and shape before it allocates; protobuf.go decodes the wire
// format with bounds checks) rather than google.golang.org/protobuf:
// docs/files.md ("Why the readers are our own") gives the measured
// comparison. They are fuzzed by FuzzReadSafetensors, FuzzReadONNX and
// FuzzReadONNXGraph.
package modelfile
