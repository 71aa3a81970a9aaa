package nn_test

import (
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// init gives the evaluator's tests in package nn the ONNX reader of
// package modelfile (see nn.LoadGraphONNX in fixtures_test.go).
func init() { nn.LoadGraphONNX = modelfile.LoadGraphONNX }
