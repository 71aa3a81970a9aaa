package learner

import (
	"context"
	"os"
	"testing"

	"github.com/relurec/relurec/dataio"
)

func TestZZProf(t *testing.T) {
	p := os.Getenv("ZZDATA")
	if p == "" {
		t.Skip()
	}
	X, err := dataio.ReadMatrix(p, "X")
	if err != nil {
		t.Fatal(err)
	}
	Y, _ := dataio.ReadMatrix(p, "Y")
	for i := 0; i < 3; i++ {
		if _, err := Fit(context.Background(), X, Y, Options{}); err != nil {
			t.Fatal(err)
		}
	}
}
