package twolayer

import (
	"context"
	"fmt"
	"testing"

	"github.com/relurec/relurec/synth"
)

// BenchmarkFitExactWide times Fit on noiseless data of the width the
// zero-set start is for: d = k = m, V with condition number 3, n samples
// (docs/twolayer.md, "Zero-set start"). Data are drawn outside the timer;
// every run must certify. Single-threaded:
//
//	go test -run '^$' -bench FitExactWide -benchtime 1x -cpu 1 ./twolayer
func BenchmarkFitExactWide(b *testing.B) {
	for _, c := range []struct{ k, n int }{{100, 200000}, {200, 40000}} {
		b.Run(fmt.Sprintf("k=%d_n=%d", c.k, c.n), func(b *testing.B) {
			cfg := synth.TwoLayerConfig{D: c.k, K: c.k, M: c.k, CondV: 3}
			in := newInstance(b, 1, cfg, c.n, nil, synth.Noise{})
			b.ResetTimer()
			for range b.N {
				res, err := Fit(context.Background(), in.X, in.Y, Options{Hidden: c.k})
				if err != nil {
					b.Fatal(err)
				}
				if !res.Certificate.Met {
					b.Fatalf("not certified: %s", res.Reason)
				}
				b.ReportMetric(res.Certificate.Residual, "residual")
			}
		})
	}
}
