package extract

import "testing"

// Three hidden layers: the last one is extracted region by region
// (patterns.go), every parameter within 1e-8 after alignment and the
// certificate met. The shapes and seeds are ones where every unit of the
// last layer switches in the frequent regions; docs/extract.md lists the
// seeds where some do not.
func TestExtractThreeHiddenLayers(t *testing.T) {
	cases := []struct {
		sizes []int
		seed  uint64
	}{
		{[]int{30, 16, 8, 8, 3}, 1},
		{[]int{30, 16, 8, 8, 3}, 2},
		{[]int{40, 20, 10, 8, 3}, 2},
		{[]int{40, 20, 10, 8, 3}, 3},
		{[]int{64, 24, 12, 12, 5}, 1},
	}
	for _, c := range cases {
		net := deepTeacher(t, c.sizes, c.seed)
		checkDeep(t, net, Options{Seed: c.seed, Widths: c.sizes[1 : len(c.sizes)-1]}, 1e-8)
	}
}
