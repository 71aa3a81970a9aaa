package main

import "github.com/relurec/relurec/nn"

// activationHelp documents the --activation flag of gen twolayer and learn
// twolayer.
const activationHelp = "hidden activation φ: relu, relupow<c> = max(x,0)^c with c > 0 (e.g. relupow2, relupow3, relupow0.5) or reluexp = e^{max(x,0)} − 1"

// parseActivationFlag returns the canonical activation named by --activation
// ("" is relu), or a usage error. Only rectified activations are accepted:
// they are the ones the two-layer routes handle.
func parseActivationFlag(s string) (nn.Activation, error) {
	if s == "" {
		return nn.ReLU, nil
	}
	a, err := nn.ParseActivation(s)
	if err != nil || !a.Rectified() {
		return "", usageErrorf("--activation %q: want relu, relupow<c> with c > 0 (e.g. relupow2) or reluexp", s)
	}
	return a, nil
}
