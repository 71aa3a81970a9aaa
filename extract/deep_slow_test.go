//go:build slow

package extract

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// TestSlowDeep measures the layer-by-layer extraction of networks with
// two and three hidden layers at PyTorch's initialisation (widths given),
// three seeds each. RELUREC_DEEP="784,32,16,10" runs that shape only.
func TestSlowDeep(t *testing.T) {
	shapes := [][]int{{784, 32, 16, 10}, {784, 64, 32, 10}, {784, 32, 16, 16, 10}}
	if s := os.Getenv("RELUREC_DEEP"); s != "" {
		var sh []int
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			sh = append(sh, v)
		}
		shapes = [][]int{sh}
	}
	for _, sizes := range shapes {
		for seed := uint64(1); seed <= 3; seed++ {
			net := deepTeacher(t, sizes, seed)
			start := time.Now()
			res, err := Extract(context.Background(), FromMLP(net), sizes[0], Options{Seed: seed, Widths: sizes[1 : len(sizes)-1]})
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			maxRel := maxRelError(net, res)
			var per []string
			for _, l := range res.Layers {
				per = append(per, fmt.Sprintf("%d units/%d queries/%d lines", l.Units, l.Queries, l.Lines))
			}
			t.Logf("%v seed %d: %s; queries %d (2^%.2f), %.1f s, certificate %.1e, max relative parameter error %.1e, warnings %v",
				sizes, seed, strings.Join(per, ", "), res.Queries, math.Log2(float64(res.Queries)), el.Seconds(), res.Certificate.Residual, maxRel, res.Warnings)
		}
	}
}

// TestSlowThreeLayerShapes counts the certified extractions of small
// three-hidden-layer networks at PyTorch-like initialisation, five shapes
// and three seeds each (docs/extract.md, "Three hidden layers").
func TestSlowThreeLayerShapes(t *testing.T) {
	shapes := [][]int{{30, 16, 8, 8, 3}, {24, 12, 8, 6, 3}, {40, 20, 10, 8, 3}, {50, 16, 8, 8, 4}, {64, 24, 12, 12, 5}}
	certified := 0
	for _, sizes := range shapes {
		for seed := uint64(1); seed <= 3; seed++ {
			net := deepTeacher(t, sizes, seed)
			res, err := Extract(context.Background(), FromMLP(net), sizes[0], Options{Seed: seed, Widths: sizes[1 : len(sizes)-1]})
			if err != nil {
				t.Fatal(err)
			}
			if res.Certificate.Met {
				certified++
			}
			t.Logf("%v seed %d: certificate %.1e, %d queries, warnings %v", sizes, seed, res.Certificate.Residual, res.Queries, res.Warnings)
		}
	}
	t.Logf("certified %d of %d", certified, 3*len(shapes))
}

// TestSlowFloat32TwoHiddenLayerShapes counts the certified extractions of
// small two-hidden-layer networks at PyTorch's initialisation behind the
// Go float32 oracle, four shapes and three seeds each (docs/extract.md,
// "Two hidden layers behind a float32 oracle").
func TestSlowFloat32TwoHiddenLayerShapes(t *testing.T) {
	shapes := [][]int{{30, 10, 6, 3}, {40, 12, 8, 5}, {60, 16, 8, 4}, {100, 24, 12, 10}}
	certified := 0
	for _, sizes := range shapes {
		for seed := uint64(1); seed <= 3; seed++ {
			net := deepTeacher(t, sizes, seed)
			res, err := Extract(context.Background(), float32Oracle(net), sizes[0], Options{Seed: seed, Widths: sizes[1 : len(sizes)-1]})
			if err != nil {
				t.Fatal(err)
			}
			maxRel := maxRelError(net, res)
			if res.Certificate.Met {
				certified++
			}
			t.Logf("%v seed %d: units %s, certificate %.1e (met %v), max relative parameter error %.1e, %d queries; last layer: %d lines, %s", sizes, seed, res.unitsText(), res.Certificate.Residual, res.Certificate.Met, maxRel, res.Queries, res.Layers[len(res.Layers)-1].Lines, res.Layers[len(res.Layers)-1].Check)
		}
	}
	t.Logf("certified %d of %d", certified, 3*len(shapes))
}

// growLast with each live last-layer unit of growBack's teacher removed in
// turn: never worse than without the unit, and at least one comes back
// exactly (docs/extract.md reports the rest).
func TestSlowGrowLastEachUnit(t *testing.T) {
	exact := 0
	for missing := 0; missing < 7; missing++ {
		off, res, before := growBack(t, missing)
		if res > before {
			t.Errorf("unit %d: residual %.1e after growing, %.1e before", missing, res, before)
		}
		if res <= wholeTol && slices.Max(off) <= 1e-8 {
			exact++
		}
	}
	t.Logf("%d of 7 grown back within 1e-8", exact)
	if exact == 0 {
		t.Error("no unit grown back")
	}
}

// TestSlowFloat32Teacher extracts a network from a file (RELUREC_TEACHER:
// a safetensors or ONNX MLP, such as the teachers bench/extract_fashion.py
// --keep saves) behind the Go float32 oracle, its widths given and
// RELUREC_SEED (default 0) the seed, and reports the units per layer, the
// certificate and the largest relative parameter error after alignment
// (docs/extract.md, "Two hidden layers behind a float32 oracle").
func TestSlowFloat32Teacher(t *testing.T) {
	path := os.Getenv("RELUREC_TEACHER")
	if path == "" {
		t.Skip("RELUREC_TEACHER not set")
	}
	net, _, err := modelfile.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := strconv.Atoi(os.Getenv("RELUREC_SEED"))
	var widths []int
	for _, l := range net.Layers[:len(net.Layers)-1] {
		widths = append(widths, l.Out())
	}
	start := time.Now()
	res, err := Extract(context.Background(), float32Oracle(net), net.In(), Options{Seed: uint64(seed), Widths: widths})
	if err != nil {
		t.Fatal(err)
	}
	maxRel := maxRelError(net, res)
	t.Logf("%s seed %d: units %s, queries %d (2^%.2f), %.0f s, certificate %.1e (met %v), max relative parameter error %.1e",
		path, seed, res.unitsText(), res.Queries, math.Log2(float64(res.Queries)), time.Since(start).Seconds(), res.Certificate.Residual, res.Certificate.Met, maxRel)
}

// A 784-32-16-10 at PyTorch's initialisation behind a float32 oracle that
// rounds a batch's rows by their position, as PyTorch's float32 Linear
// does (batchedFloat32Oracle): every unit found, certified, and every
// parameter to float32 accuracy (the batches' rounding is what
// screenMerged keeps offRankOne's test away from).
func TestSlowBatchedFloat32(t *testing.T) {
	sizes := []int{784, 32, 16, 10}
	net := deepTeacher(t, sizes, 1)
	start := time.Now()
	res := checkDeepWith(t, net, batchedFloat32Oracle(net), Options{Seed: 1, Widths: sizes[1 : len(sizes)-1]}, 1e-5)
	t.Logf("units %s, queries %d (2^%.2f), %.0f s", res.unitsText(), res.Queries, math.Log2(float64(res.Queries)), time.Since(start).Seconds())
}

// maxRelError is the largest relative parameter error of res's network
// against net after alignment (metrics.CompareMLP), +Inf when it has none
// or a different shape.
func maxRelError(net *nn.MLP, res *Result) float64 {
	if res.Network == nil {
		return math.Inf(1)
	}
	cmp, err := metrics.CompareMLP(net, res.Network)
	if err != nil {
		return math.Inf(1)
	}
	return cmp.MaxRel
}
