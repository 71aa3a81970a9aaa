package extract

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relurec/relurec/errs"
)

// Three hidden layers: the last one is extracted region by region
// (patterns.go), every parameter within 1e-8 after alignment and the
// certificate met. The shapes and seeds are ones where every unit of the
// last layer switches in the regions searched; docs/extract.md counts
// the seeds where some do not.
func TestExtractThreeHiddenLayers(t *testing.T) {
	cases := []struct {
		sizes []int
		seed  uint64
	}{
		{[]int{30, 16, 8, 8, 3}, 1},
		// A second-layer candidate that is a third-layer unit seen
		// within one activation pattern (a combination of second-layer
		// rows) is dropped, and the search goes on for the real one.
		{[]int{24, 12, 8, 6, 3}, 1},
		{[]int{40, 20, 10, 8, 3}, 2},
		{[]int{64, 24, 12, 12, 5}, 3},
		// A last-layer unit whose kinks lie only where a second-layer
		// unit is inactive: its weight over that unit is fitted with
		// every other parameter held (fitMissing).
		{[]int{30, 16, 8, 8, 3}, 2},
	}
	for _, c := range cases {
		net := deepTeacher(t, c.sizes, c.seed)
		checkDeep(t, net, Options{Seed: c.seed, Widths: c.sizes[1 : len(c.sizes)-1]}, 1e-8)
	}
}

// A last layer with a unit never seen (it switches in no region
// searched) is fitted, reported as such, fails its layer's check and, with
// Exact, the extraction (errs.ErrNotExact) when the certificate is not
// met.
func TestExtractThreeHiddenLayersPartial(t *testing.T) {
	net := deepTeacher(t, []int{24, 12, 8, 6, 3}, 3)
	res, err := Extract(context.Background(), FromMLP(net), 24, Options{Seed: 3, Widths: []int{12, 8, 6}, Exact: true})
	if res == nil || len(res.Layers) != 3 {
		t.Fatalf("result %+v, err %v", res, err)
	}
	last := res.Layers[2]
	fitted := false
	for _, w := range res.Warnings {
		fitted = fitted || strings.Contains(w, "least-squares fit")
	}
	if !fitted || last.Passed || last.Units >= last.Width {
		t.Fatalf("last layer %+v, warnings %v", last, res.Warnings)
	}
	if res.Certificate.Met != (err == nil) || !res.Certificate.Met && !errors.Is(err, errs.ErrNotExact) {
		t.Errorf("certificate %+v, err %v", res.Certificate, err)
	}
}
