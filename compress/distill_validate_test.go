package compress

import (
	"errors"
	"testing"

	"github.com/relurec/relurec/nn"
)

// A misspelt distillation objective is refused by Validate, before the
// layer fit that precedes the distillation, not inside nn.Distill after
// that fit.
func TestValidateRefusesUnknownObjective(t *testing.T) {
	if err := (DistillOptions{Epochs: 1, Objective: "logit"}).withDefaults().validate(); !errors.Is(err, ErrInput) {
		t.Fatalf("objective \"logit\": %v, want ErrInput", err)
	}
	for _, ok := range []nn.DistillObjective{"", nn.ObjectiveSoftmax, nn.ObjectiveLogits} {
		if err := (DistillOptions{Epochs: 1, Objective: ok}).withDefaults().validate(); err != nil {
			t.Errorf("objective %q: %v", ok, err)
		}
	}
}
