package compress

import (
	"context"
	"github.com/relurec/relurec/internal/testutil"
	"math/rand/v2"
	"strings"
	"testing"
)

// DefaultOptions is the recipe on an MLP — sequential, the sensitivity
// allocation (AllocAuto), distillation only at budgets ≤ DistillMaxKept —
// and reduces on a CNN to the global allocation without distillation and
// without an error; FastOptions is the zero value's behaviour.
func TestDefaultOptionsByNetworkAndBudget(t *testing.T) {
	net, x, _ := teacher(21)
	ctx := context.Background()
	for _, c := range []struct {
		keep    float64
		distill bool
	}{{0.2, true}, {0.5, false}} {
		o := DefaultOptions(net)
		o.Keep = c.keep
		o.Distill.Epochs = 2
		res, err := CompressMLP(ctx, net, x, o)
		if err != nil {
			t.Fatal(c.keep, err)
		}
		if !res.Sequential || !strings.Contains(res.Selection, string(AllocSensitivity)) || len(res.Profiles) == 0 || (res.Distill != nil) != c.distill {
			t.Fatalf("keep %g: sequential %v, selection %q, %d profiles, distillation %+v", c.keep, res.Sequential, res.Selection, len(res.Profiles), res.Distill)
		}
	}
	fast, err := CompressMLP(ctx, net, x, FastOptions())
	if err != nil {
		t.Fatal(err)
	}
	zero, err := CompressMLP(ctx, net, x, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fast.Sequential || fast.Selection != zero.Selection || fast.Params != zero.Params || fast.Distill != nil {
		t.Fatalf("FastOptions: sequential %v, %q (%d parameters) against the zero value's %q (%d)", fast.Sequential, fast.Selection, fast.Params, zero.Selection, zero.Params)
	}

	cnn := tinyCNN(rand.New(rand.NewPCG(4, 5)), 6, 0)
	o := DefaultOptions(cnn)
	o.Keep = 0.2
	res, err := CompressCNN(ctx, cnn, testutil.RandDense(rand.New(rand.NewPCG(6, 7)), 200, cnn.In()), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sequential || !strings.Contains(res.Selection, string(AllocGlobal)) || res.Distill != nil {
		t.Fatalf("CNN: sequential %v, selection %q, distillation %+v", res.Sequential, res.Selection, res.Distill)
	}
}
