package compress

import (
	"errors"
	"testing"

	"github.com/relurec/relurec/train"
)

// A misspelt distillation objective is refused by Validate, before the
// layer fit that precedes the distillation, not inside train.Distill after
// that fit.
func TestValidateRefusesUnknownObjective(t *testing.T) {
	if err := (DistillOptions{Epochs: 1, Objective: "logit"}).withDefaults().validate(); !errors.Is(err, ErrInput) {
		t.Fatalf("objective \"logit\": %v, want ErrInput", err)
	}
	for _, ok := range []train.Objective{"", train.ObjectiveSoftmax, train.ObjectiveLogits} {
		if err := (DistillOptions{Epochs: 1, Objective: ok}).withDefaults().validate(); err != nil {
			t.Errorf("objective %q: %v", ok, err)
		}
	}
}
