//go:build slow

package extract

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relurec/relurec/metrics"
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
			maxRel := math.Inf(1)
			if res.Network != nil {
				if cmp, err := metrics.CompareMLP(net, res.Network); err == nil {
					maxRel = cmp.MaxRel
				}
			}
			var per []string
			for _, l := range res.Layers {
				per = append(per, fmt.Sprintf("%d units/%d queries/%d lines", l.Units, l.Queries, l.Lines))
			}
			t.Logf("%v seed %d: %s; queries %d (2^%.2f), %.1f s, certificate %.1e, max relative parameter error %.1e, warnings %v",
				sizes, seed, strings.Join(per, ", "), res.Queries, math.Log2(float64(res.Queries)), el.Seconds(), res.Certificate.Residual, maxRel, res.Warnings)
		}
	}
}
