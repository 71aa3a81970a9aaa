package compress

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// Options controls CompressMLP. The zero value works: sequential is off,
// method "data" (Alg 2c), half of the parameters kept with the global
// allocation.
//
// The rank of each layer comes from exactly one of Ranks, Energy,
// TargetError and Keep (checked in that order; Keep = 0.5 when none is set).
type Options struct {
	// Method is one of Methods; default MethodData.
	Method Method
	// Sequential fits each layer on the compressed network's own inputs X̌
	// (Alg 3, "asymmetric" reconstruction); false fits every layer on the
	// original network's activations (X̌ = X, the DRONE/AFM style).
	Sequential bool
	// Keep is the global budget: the compressed network stores at most
	// ⌊Keep·P⌋ parameters, P = the original network's weights plus biases
	// (every parameter counted, factored layers as r·(d + d2) + biases).
	// Must lie in (0, 1]. Layers whose share would not save parameters stay
	// dense.
	Keep float64
	// Allocation is how Keep is split over layers: AllocGlobal (default),
	// AllocUniform, AllocSensitivity (measured end-to-end error), or the
	// baselines AllocASVD and AllocSVDLLM2 (see Allocations).
	Allocation Allocation
	// Ranks fixes each layer's rank (one entry per layer of the original
	// network; 0 keeps that layer dense). A rank that would not save
	// parameters keeps the layer dense, with a warning.
	Ranks []int
	// Energy, in (0, 1], picks per layer the smallest rank whose singular
	// values (of the method's objective) hold that fraction of Σ s².
	Energy float64
	// TargetError, > 0, picks per layer the smallest rank whose relative
	// calibration error ‖Ỹ − Ŷ‖_F/‖Ỹ‖_F is at most TargetError (on the
	// compressed inputs in sequential mode), computed exactly from the fit.
	TargetError float64
	// Layer tunes the per-layer solver (bias mode, route, ridge, …).
	Layer LayerOptions
	// Holdout, if non-nil, are held-out inputs (rows) on which each layer's
	// error is also reported.
	Holdout *mat.Dense
	// Distill, with Epochs > 0, fits the compressed network end to end to
	// the original network's output on the calibration inputs after the
	// layer-by-layer fit (knowledge distillation, no labels; MLPs only).
	// Off by default: it is not part of Zhang & Saab's algorithm.
	Distill DistillOptions
	// Progress, if non-nil, is called as layers complete (stage, done,
	// total).
	Progress func(stage string, done, total int)
}

// LayerReport is the evidence for one layer of the original network.
type LayerReport struct {
	Layer int `json:"layer"` // index in the original network
	In    int `json:"in"`
	Out   int `json:"out"`
	// Rank is the rank kept; Dense reports a layer kept dense (Rank 0): its
	// original weights, or with Refit their least-squares refit.
	Rank  int  `json:"rank"`
	Dense bool `json:"dense"`
	// Refit reports a layer kept dense but refit by least squares on the
	// compressed network's inputs (sequential data-driven compression).
	Refit   bool `json:"refit,omitempty"`
	MaxRank int  `json:"max_rank"`
	// Params and DenseParams count this layer's weights and biases after
	// and before compression.
	Params      int `json:"params"`
	DenseParams int `json:"dense_params"`
	// Error is ‖Ỹ − Ŷ‖_F/‖Ỹ‖_F on the calibration data: Ỹ the original
	// pre-activations on the original inputs, Ŷ the compressed layer's on the
	// compressed network's inputs (what the network actually computes).
	// LocalError is the same with the original inputs (the layer alone).
	// HeldoutError is Error on Options.Holdout. All three describe the
	// layer-by-layer fit, before any distillation (Result.Distill).
	Error        float64  `json:"error"`
	LocalError   float64  `json:"local_error"`
	HeldoutError *float64 `json:"heldout_error,omitempty"`
	// Energy is the fraction of Σ s² of the fit's spectrum kept at Rank.
	Energy     float64    `json:"energy"`
	Whitening  *Whitening `json:"whitening,omitempty"`
	Iterations int        `json:"iterations,omitempty"`
	Converged  bool       `json:"converged"`
	Warnings   []string   `json:"warnings,omitempty"`
	Seconds    float64    `json:"seconds"`
}

// Result is what CompressMLP returns.
type Result struct {
	// Model is the compressed network: each compressed layer is two
	// consecutive layers (Identity between them), see Factored.Layers.
	Model      *nn.MLP `json:"-"`
	Method     Method  `json:"method"`
	Sequential bool    `json:"sequential"`
	// Selection describes how ranks were chosen, e.g. "keep 0.1 (global)".
	Selection string `json:"selection"`
	// Params and DenseParams count every weight and bias of the compressed
	// and original networks; Kept = Params/DenseParams. Budget is
	// ⌊Keep·DenseParams⌋ (0 unless Keep chose the ranks); Params ≤ Budget.
	Params      int     `json:"params"`
	DenseParams int     `json:"dense_params"`
	Kept        float64 `json:"kept"`
	Budget      int     `json:"budget,omitempty"`
	// MultiplyAdds per sample, compressed and original.
	MultiplyAdds      int           `json:"multiply_adds"`
	DenseMultiplyAdds int           `json:"dense_multiply_adds"`
	CalibrationRows   int           `json:"calibration_rows"`
	Layers            []LayerReport `json:"layers"`
	// Profiles are the measured per-layer output errors a sensitivity or
	// ASVD-style allocation chose the ranks from.
	Profiles []RankProfile `json:"profiles,omitempty"`
	// Distill reports the end-to-end distillation (Options.Distill).
	Distill  *DistillReport `json:"distill,omitempty"`
	Warnings []string       `json:"warnings,omitempty"`
	Elapsed  time.Duration  `json:"elapsed"`
}

// CheckNetwork returns an error wrapping ErrInput unless net is a chain of
// Linear layers with ReLU or Identity activations and finite parameters.
func CheckNetwork(net *nn.MLP) error {
	if err := net.Validate(); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInput)
	}
	return nil
}

// CompressMLP compresses every layer of net to low rank from calibration
// inputs x0 (rows, net.In() columns), without labels, gradients or
// fine-tuning (the post-training setting of Zhang & Saab). Each layer is fit
// by Options.Method; with Sequential, on the inputs produced by the already
// compressed earlier layers (Alg 3), targets always being the original
// network's pre-activations. The paper's guarantees are per layer (Theorems
// 3.1, 4.4, 4.9); error propagation across layers is not analysed by the
// paper and is measured here instead (LayerReport.Error).
//
// A network that already contains factored layers (a Linear with Identity
// activation followed by another Linear) is first multiplied out (nn
// MLP.Merge), with a warning. Errors caused by the input wrap ErrInput.
func CompressMLP(ctx context.Context, net *nn.MLP, x0 *mat.Dense, o Options) (*Result, error) {
	start := time.Now()
	if err := CheckNetwork(net); err != nil {
		return nil, err
	}
	res := &Result{Sequential: o.Sequential}
	if net.HasFactored() {
		net = net.Merge()
		res.Warnings = append(res.Warnings, "the network holds factored layers; they were multiplied out before compression")
	}
	if x0 == nil {
		return nil, fmt.Errorf("compress: no calibration data: %w", ErrInput)
	}
	m, d := x0.Dims()
	if d != net.In() {
		return nil, fmt.Errorf("compress: calibration data has %d columns but the network takes %d inputs: %w", d, net.In(), ErrInput)
	}
	if err := finite("calibration data", x0); err != nil {
		return nil, err
	}
	if o.Holdout != nil {
		if _, hd := o.Holdout.Dims(); hd != d {
			return nil, fmt.Errorf("compress: held-out data has %d columns but the network takes %d: %w", hd, d, ErrInput)
		}
		if err := finite("held-out data", o.Holdout); err != nil {
			return nil, err
		}
	}
	L := len(net.Layers)
	mode, lo, err := o.prepare(res, L)
	if err != nil {
		return nil, err
	}
	res.DenseParams = net.NumParams()
	res.DenseMultiplyAdds = net.MultiplyAdds()
	res.CalibrationRows = m

	// Row-convention weights.
	ws := make([]*mat.Dense, L)
	costs := make([]layerCost, L)
	for i, l := range net.Layers {
		ws[i] = mat.DenseCopyOf(l.Weight.T())
		costs[i] = newLayerCost(l.In(), l.Out(), l.Bias != nil, o.Method, lo)
	}

	// The original network's stream on the calibration data: inputs xs[i]
	// and pre-activations ys[i] of every layer, computed once.
	xs := make([]*mat.Dense, L+1)
	ys := make([]*mat.Dense, L)
	xs[0] = x0
	for i, l := range net.Layers {
		ys[i] = preact(xs[i], ws[i], l.Bias)
		xs[i+1] = activate(ys[i], l.Act)
	}

	// Global budget: allocate ranks from spectra of the original network.
	var ranks []int
	var pre []*Fit // fits on the original activations, reusable where X̌ = X
	if mode == "keep" {
		budget := int(math.Floor(o.Keep * float64(res.DenseParams)))
		res.Budget = budget
		if o.Allocation.measured() {
			fits, err := originalFits(ctx, net, ws, xs, ys, costs, o.Method, lo)
			if err != nil {
				return nil, err
			}
			if o.Allocation == AllocSVDLLM2 {
				ranks, _, err = allocateMeasured(costs, nil, fits, budget, o.Allocation)
			} else {
				// Sequential data-driven compression refits the later
				// layers on the compressed stream; the measurement does too.
				p := newProbe(net, ws, xs, ys, costs, fits, o.Sequential && o.Method == MethodData)
				ranks, err = measuredAllocation(ctx, p, budget, o.Allocation)
				res.Profiles = p.profiles()
			}
			if err != nil {
				return nil, err
			}
			if o.Method != MethodConvex && o.Method != MethodReLU { // their fits depend on the rank
				pre = fits
			}
		} else {
			spectra, err := allocationSpectra(ctx, net, ws, xs, ys, o.Method, lo)
			if err != nil {
				return nil, err
			}
			ranks, _, err = allocate(costs, spectra, budget, o.Allocation)
			if err != nil {
				return nil, err
			}
		}
	}

	xc := x0 // the compressed stream
	ho, hc := o.Holdout, o.Holdout
	out := &nn.MLP{}
	for i, l := range net.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lstart := time.Now()
		dd, d2 := l.In(), l.Out()
		rep := LayerReport{Layer: i, In: dd, Out: d2, DenseParams: costs[i].dense, MaxRank: min(dd, d2), Converged: true}
		xo, yo := xs[i], ys[i] // original inputs and pre-activations
		prob := Problem{W: ws[i], Bias: l.Bias, Act: l.Act, X: xo, y: yo}
		if o.Sequential && o.Method != MethodSVDLLM && i > 0 {
			prob.Xc = xc
		}
		r := 0
		switch mode {
		case "keep":
			r = ranks[i]
		case "ranks":
			r = o.Ranks[i]
		}
		var pf *Fit
		if pre != nil {
			pf = pre[i]
		}
		step, err := o.fitStep(layerStep{index: i, prob: prob, cost: costs[i], mode: mode, rank: r, pre: pf}, lo, &rep, &res.Warnings)
		if err != nil {
			return nil, err
		}
		keepDense, f := step.dense, step.f
		var yc, ycLocal *mat.Dense
		if keepDense {
			lay := nn.Layer{Weight: mat.DenseCopyOf(l.Weight), Bias: cloneVec(l.Bias), Act: l.Act}
			if step.refit != nil {
				lay = *step.refit
			}
			out.Layers = append(out.Layers, lay)
			yc, ycLocal = denseOutputs(lay, xc, xo)
		} else {
			lay := f.Layers(l.Act)
			out.Layers = append(out.Layers, lay[0], lay[1])
			yc = f.Apply(xc)
			ycLocal = f.Apply(xo)
		}
		yn := math.Max(mat.Norm(yo, 2), 1e-300)
		rep.Error = diffNorm(yo, yc) / yn
		rep.LocalError = diffNorm(yo, ycLocal) / yn
		if ho != nil {
			hyo := preact(ho, ws[i], l.Bias)
			var hyc *mat.Dense
			if keepDense {
				last := out.Layers[len(out.Layers)-1]
				hyc = preact(hc, mat.DenseCopyOf(last.Weight.T()), last.Bias)
			} else {
				hyc = f.Apply(hc)
			}
			e := diffNorm(hyo, hyc) / math.Max(mat.Norm(hyo, 2), 1e-300)
			rep.HeldoutError = &e
			ho, hc = activate(hyo, l.Act), activate(hyc, l.Act)
		}
		xc = activate(yc, l.Act)
		rep.Seconds = time.Since(lstart).Seconds()
		res.Params += rep.Params
		res.Layers = append(res.Layers, rep)
		if o.Progress != nil {
			o.Progress("compress", i+1, L)
		}
	}
	if o.Distill.Epochs > 0 {
		if res.Distill, err = distill(ctx, net, out, x0, o.Distill, o.Progress); err != nil {
			return nil, err
		}
	}
	res.Model = out
	res.MultiplyAdds = out.MultiplyAdds()
	res.Kept = float64(res.Params) / float64(res.DenseParams)
	if res.Budget > 0 && res.Params > res.Budget {
		// allocate guarantees this; a violation is a bug, not bad input.
		return nil, fmt.Errorf("compress: internal error: %d parameters exceed the budget of %d", res.Params, res.Budget)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// methodUsesBiasMode reports whether the method honours LayerOptions.Bias.
func methodUsesBiasMode(method Method) bool {
	return method == MethodData || method == MethodConvex || method == MethodReLU
}

// methodRefitsBias reports whether the method stores a dense bias even for
// a layer without one.
func methodRefitsBias(method Method, bias string) bool {
	if method == MethodOutputPCA {
		return true
	}
	return methodUsesBiasMode(method) && bias != BiasKeep && bias != BiasAugment
}

// allocationSpectra returns, per layer, the singular values the global
// allocation ranks on: those of W (svd), of S·W (asvd), and otherwise of the
// centred pre-activations of the original network on the calibration data
// (which equal Alg 2c's spectrum with X̌ = X of full column rank, claim 3).
func allocationSpectra(ctx context.Context, net *nn.MLP, ws, xs, ys []*mat.Dense, method Method, lo LayerOptions) ([][]float64, error) {
	out := make([][]float64, len(ws))
	for i, l := range net.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		x, y := xs[i], ys[i]
		switch method {
		case MethodSVD, MethodASVD:
			f, err := FitLayer(Problem{W: ws[i], Bias: l.Bias, Act: l.Act, X: x}, method, lo)
			if err != nil {
				return nil, fmt.Errorf("layer %d: %w", i, err)
			}
			out[i] = f.S
		default:
			g := gram(centered(y, colMeans(y)))
			var e mat.EigenSym
			if !e.Factorize(g, false) {
				return nil, fmt.Errorf("compress: layer %d: eigenvalues of the output covariance did not converge", i)
			}
			vals := e.Values(nil) // ascending
			s := make([]float64, len(vals))
			for k := range vals {
				s[k] = math.Sqrt(math.Max(vals[len(vals)-1-k], 0))
			}
			out[i] = s[:min(len(s), min(l.In(), l.Out()))]
		}
	}
	return out, nil
}

// errorCurve returns the exact squared calibration error of every
// truncation of f on problem p (against Ỹ = X·W + b).
func (f *Fit) errorCurve(p Problem) []float64 {
	xc := p.xcheck()
	var z, t *mat.Dense
	switch {
	case f.mode == BiasAugment:
		z, t = withOnes(xc), preact(p.X, p.W, p.Bias)
	case f.mode == BiasCenter || f.biasFn != nil:
		z = centered(xc, colMeans(xc))
		t = centered(preact(p.X, p.W, p.Bias), f.ybar)
	default:
		// The bias is kept as it is: it cancels from Ỹ − Ŷ, so both sides
		// are compared without it.
		z, t = xc, preact(p.X, p.W, nil)
	}
	return errorCurve(t, z, f.a0, f.v)
}

func energyAt(s []float64, r int) float64 {
	var tot, kept float64
	for k, x := range s {
		tot += x * x
		if k < r {
			kept += x * x
		}
	}
	if tot == 0 {
		return 1
	}
	return kept / tot
}

// diffNorm is ‖a − b‖_F.
func diffNorm(a, b *mat.Dense) float64 {
	r, c := a.Dims()
	var s float64
	for i := 0; i < r; i++ {
		ar, br := a.RawRowView(i)[:c], b.RawRowView(i)[:c]
		for j, v := range ar {
			d := v - br[j]
			s += d * d
		}
	}
	return math.Sqrt(s)
}

// activate applies act elementwise to a copy of y.
func activate(y *mat.Dense, act nn.Activation) *mat.Dense {
	if act == nn.Identity {
		return y
	}
	if act != nn.ReLU { // another rectified activation (nn.RectPow, nn.RectExp)
		out := mat.DenseCopyOf(y)
		f := act.Func()
		out.Apply(func(_, _ int, v float64) float64 { return f(v) }, out)
		return out
	}
	r, c := y.Dims()
	out := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		dst := out.RawRowView(i)
		for j, v := range y.RawRowView(i)[:c] {
			if v > 0 {
				dst[j] = v
			}
		}
	}
	return out
}
