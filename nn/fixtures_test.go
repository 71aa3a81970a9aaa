package nn

// LoadGraphONNX reads an ONNX file as a Graph, for the tests that run the
// evaluator on exported models (testdata/vit_tiny_*.onnx). The reader is
// package modelfile's, which imports nn, so a file of package nn cannot
// call it; reader_test.go (package nn_test, compiled into the same test
// binary) sets this variable before any test runs.
var LoadGraphONNX func(path string) (*Graph, error)

// CNNChunk is cnnChunk, for the CNN tests of package nn_test.
const CNNChunk = cnnChunk
