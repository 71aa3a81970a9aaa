package extract

import (
	"context"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// Growing the units a coarse oracle hides.
//
// Behind a float32 oracle the line search can miss units whose kinks bend
// lines near the rounding: a trained 784-128-10 keeps a dozen units at
// their initial norm (‖w‖ ≈ 0.6 against 1.2–2 for the others, output
// columns half as large), active on half of the Gaussian queries but on
// none of the test images, and their slope changes on a line are about
// five times smaller than the median unit's. The least-squares polish
// (refine) cannot stand in for them: fitted without them, the units found
// move to absorb what the missing ones contribute (every direction of a
// 784-128-10 with 12 missing tilts by 4e-2 while the residual falls only
// from 2e-2 to 9e-3), and a second search on that residual sees the
// tilted units' kinks, not the missing ones'.
//
// Before the polish, the residual of the units found, each to a few
// digits, is almost exactly the missing units' contribution: a
// one-hidden-layer network of their number. growUnits fits such a
// network to it by Adam on the refine queries (logit regression,
// train.Distill) — an approximate fit is enough — and the polish then
// takes every unit, found and grown, to the oracle's precision together
// (784-128-10 behind the Go float32 oracle, 12 units missing, the others
// 1e-3 off: residual 5e-4 → 3.9e-7, every unit within an angle of 1e-5).

// growSteps and growRate are the Adam run that fits the grown units to
// the residual: 16384 steps of 128 refine queries (as many passes over
// them as that takes) at step size 3e-3 explain 97% of a 784-128-10's
// twelve missing units.
const (
	growSteps = 16384
	growBatch = 128
	growRate  = 3e-3
)

// growCount is how many units growUnits adds to m units found: the ones
// the width given still lacks, and m/16 more (at least 4). The spare
// units stand in for records that are not units (a merged jump read as
// one) and for missing units when the width is not given, and they keep
// Adam from stalling: with exactly as many units as are missing, one of
// them often ends on no kink at all (a 30-12-10 with two missing: 4 of 9
// fits stall with 2 units, 1 of 9 with 3, none with 4). The width given
// then keeps the units the fit misses most (dropToWidth); without it,
// dropSpare removes the units the polish left idle.
func growCount(m, hidden int) int {
	return max(hidden-m, 0) + max((m+15)/16, 4)
}

// growUnits returns net with k more units, fitted by Adam to the residual
// Y − net(X) with net held fixed.
func growUnits(ctx context.Context, net *nn.Depth2, X, Y *mat.Dense, k int, seed uint64) (*nn.Depth2, error) {
	R := mat.DenseCopyOf(Y)
	R.Sub(R, net.Forward(X))
	small, err := nn.NewMLP([]int{net.In(), k, net.Out()}, seed)
	if err != nil {
		return nil, err
	}
	n, _ := X.Dims()
	perEpoch := (n + growBatch - 1) / growBatch
	opt := train.DistillOptions{Options: train.Options{Epochs: (growSteps + perEpoch - 1) / perEpoch, BatchSize: growBatch, LearningRate: growRate, Seed: seed}, Objective: train.ObjectiveLogits}
	if _, err := train.Distill(ctx, small, X, R, opt); err != nil {
		return nil, err
	}
	return withUnits(net, &nn.Depth2{W: small.Layers[0].Weight, B: small.Layers[0].Bias, A: small.Layers[1].Weight, C: small.Layers[1].Bias}), nil
}

// withUnits returns a network with the units of both and the sum of their
// output biases and affine terms.
func withUnits(a, b *nn.Depth2) *nn.Depth2 {
	ma, mb, d, p := a.Hidden(), b.Hidden(), a.In(), a.Out()
	out := &nn.Depth2{W: mat.NewDense(ma+mb, d, nil), B: append(append([]float64(nil), a.B...), b.B...), A: mat.NewDense(p, ma+mb, nil), C: make([]float64, p)}
	out.W.Slice(0, ma, 0, d).(*mat.Dense).Copy(a.W)
	out.W.Slice(ma, ma+mb, 0, d).(*mat.Dense).Copy(b.W)
	out.A.Slice(0, p, 0, ma).(*mat.Dense).Copy(a.A)
	out.A.Slice(0, p, ma, ma+mb).(*mat.Dense).Copy(b.A)
	for _, n := range []*nn.Depth2{a, b} {
		for o, c := range n.C {
			out.C[o] += c
		}
		if n.L != nil {
			if out.L == nil {
				out.L = mat.NewDense(p, d, nil)
			}
			out.L.Add(out.L, n.L)
		}
	}
	return out
}
