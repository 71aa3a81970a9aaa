package compress

import (
	"math"
	"runtime"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/nn"
)

// Cost is the work CompressMLP will do, by stage, in multiply-adds, and
// the time it takes on this machine (EstimateMLP): what a caller shows
// before a compression that may take a minute starts.
type Cost struct {
	// Fit is the original network's forward pass and the layer fits
	// (whitening and SVD), Sensitivity the probes of a measured allocation,
	// Distill the distillation epochs (0 when it will not run).
	Fit         float64 `json:"fit_multiply_adds"`
	Sensitivity float64 `json:"sensitivity_multiply_adds"`
	Distill     float64 `json:"distill_multiply_adds"`
	// Seconds is the estimated wall time, from the stages' multiply-adds
	// and this machine's measured matrix-product speed.
	Seconds float64 `json:"seconds"`
}

// Stage throughputs relative to the speed probe (MatmulSpeed): the layer
// fits (Householder QR, eigendecompositions, the held-out errors) run
// below one large matrix product, the probes' refits on 4096 rows and the
// distillation's minibatches above the probe's quarter-second average on
// a loaded machine. Set from the Fashion-MNIST MLP of docs/compress.md
// (784-512-256-10; the default recipe at keep 0.05 and 0.1, --fast and the
// baselines) on the 2-core machine under a load average of 11–15, where
// the compressions then took 0.35–1.1 of the estimate: it errs long.
const (
	effFit         = 0.6
	effSensitivity = 1.5
	effDistill     = 1.2
)

// EstimateMLP estimates CompressMLP's cost on net with rows calibration
// rows under o, assuming the budget Keep is spent (for the distillation's
// size), on a machine doing speed multiply-adds per second in one large
// product (MatmulSpeed).
func EstimateMLP(net *nn.MLP, rows int, o Options, speed float64) Cost {
	c := mlpCost(net, rows, o)
	c.Seconds = (c.Fit/effFit + c.Sensitivity/effSensitivity + c.Distill/effDistill) / speed
	return c
}

// mlpCost counts the multiply-adds of each stage of CompressMLP.
func mlpCost(net *nn.MLP, rows int, o Options) Cost {
	var c Cost
	n := float64(rows)
	// A measured allocation fits every layer on the original activations;
	// a sequential fit then fits every layer but the first (whose inputs
	// are the original ones) again on the compressed ones.
	keep := o.Keep
	if keep == 0 {
		keep = 0.5
	}
	alloc := o.Allocation.Resolve(true, keep, o.AutoMax())
	refit := o.Sequential && alloc.measured()
	probing := alloc.probes()
	pr := math.Min(n, probeRows)
	for i, l := range net.Layers {
		d2, d := l.Weight.Dims()
		a, b := float64(d), float64(d2)
		fits := 1.0
		if refit && i > 0 {
			fits = 2
		}
		c.Fit += n*a*b + fits*(n*a*(a+2*b)+5*math.Min(a, b)*b*b)
		if !probing || i == len(net.Layers)-1 {
			continue
		}
		// One probe pass per grid rank (plus the refinement's few): the
		// layer at that rank, then every later layer refit.
		pass := pr * math.Min(a, b) * (a + b)
		for _, m := range net.Layers[i+1:] {
			m2, m1 := m.Weight.Dims()
			pass += pr * float64(m1) * float64(m1+m2)
		}
		c.Sensitivity += float64(gridSize(min(d, d2))+4) * pass
	}
	dense := net.NumParams()
	kept := int(keep * float64(dense))
	if o.Distill.applies(kept, dense, o.AutoMax()) {
		c.Distill = float64(o.Distill.Epochs) * n * 3 * float64(kept)
	}
	return c
}

// gridSize is the number of ranks of the probes' geometric grid (1, 2, 3,
// 4, 6, 8, 12, …) up to top.
func gridSize(top int) int {
	k := 0
	for r := 1; r <= top; r = max(r+1, r*3/2) {
		k++
	}
	return k
}

// MatmulSpeed repeats the product of 1024 rows with net's first layer for
// at least 0.25 s and returns multiply-adds per second: this machine's
// speed under its current load (long enough to average over it, as the
// compression will), for EstimateMLP.
func MatmulSpeed(net *nn.MLP) float64 {
	w := net.Layers[0].Weight
	out, in := w.Dims()
	x := mat.NewDense(1024, in, nil)
	raw := x.RawMatrix().Data
	for i := range raw {
		raw[i] = float64(i%7) - 3
	}
	var y mat.Dense
	start := time.Now()
	n := 0
	for n == 0 || time.Since(start) < 250*time.Millisecond {
		y.Mul(x, w.T())
		n++
	}
	return float64(n) * 1024 * float64(in) * float64(out) / time.Since(start).Seconds()
}

// Graph stage throughputs relative to GraphSpeed (forward passes of the
// graph itself): the layer fits' linear algebra on up to GraphRows rows,
// the forward passes of the sequential fit and of the probes (counted
// whole, though a probe runs from its weight on), and the distillation's
// forward and backward passes (counted as three forward passes of the
// dense graph). Set from the defaults at keep 0.5 and 0.3 on the three
// Fashion-MNIST ViTs of docs/compress.md on 2 cores (load average 3.5–3.8):
// the compressions took 0.79–1.14 of the estimate.
const (
	effGraphFit     = 1.9
	effGraphForward = 1.9
	effGraphDistill = 2.0
)

// EstimateGraph estimates CompressGraph's cost on g with n calibration
// samples under o on a machine running speed multiply-adds per second
// through g's forward pass (GraphSpeed). Every forward pass is counted
// at the dense graph's multiply-adds, so it errs long.
func EstimateGraph(g *nn.Graph, n int, o Options, speed float64) Cost {
	var c Cost
	ns, madds := float64(n), float64(g.MultiplyAdds())
	keep := o.Keep
	if keep == 0 {
		keep = 0.5
	}
	alloc := o.Allocation.Resolve(true, keep, o.AutoMax())
	layers := graphLayers(g)
	var fit float64
	forward := ns * madds // the original graph's activations
	if o.Sequential {
		forward *= 2 // and the rewritten graph's, one run resumed layer by layer (nn.GraphRun)
	}
	for _, l := range layers {
		d2, d := l.w.Dims() // w is in × out
		a, b := float64(d2), float64(d)
		fit += GraphRows*a*(a+2*b) + 5*math.Min(a, b)*b*b
		if alloc.probes() {
			c.Sensitivity += float64(gridSize(int(math.Min(a, b)))+4) * math.Min(ns, GraphProbeSamples) * madds
		}
	}
	c.Fit = fit + forward
	dense := g.NumParams()
	if o.Distill.applies(int(keep*float64(dense)), dense, o.AutoMax()) {
		c.Distill = float64(o.Distill.Epochs) * ns * 3 * madds
	}
	c.Seconds = (fit/effGraphFit + forward/effGraphForward + c.Sensitivity/effGraphForward + c.Distill/effGraphDistill) / speed
	return c
}

// GraphSpeed runs batches of 256 samples through g on every core for at
// least 0.25 s and returns multiply-adds per second, this machine's speed
// on g under its current load, for EstimateGraph.
func GraphSpeed(g *nn.Graph) float64 {
	x := mat.NewDense(256, g.In(), nil)
	raw := x.RawMatrix().Data
	for i := range raw {
		raw[i] = float64(i%7)/7 - 0.5
	}
	counts := make([]int, runtime.GOMAXPROCS(0))
	start := time.Now()
	parallel.For(len(counts), func(_, w int) {
		for counts[w] == 0 || time.Since(start) < 250*time.Millisecond {
			g.Forward(x)
			counts[w]++
		}
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	return float64(n) * 256 * float64(g.MultiplyAdds()) / time.Since(start).Seconds()
}
