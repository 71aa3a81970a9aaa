package compress

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// The pieces of the layer-by-layer driver (Alg 3) that CompressMLP and
// CompressCNN share: the options' rank-selection mode, a layer's parameter
// accounting, and one layer's fit at the rank the mode gives. A CNN's conv
// layer enters them as the matrix layer it is on its unfolded patches.

// prepare completes and checks the options for a network of L weight
// layers: the method's default, the rank-selection mode ("keep", "ranks",
// "energy" or "target") and the per-layer solver options. It fills
// res.Selection, res.Method and res.Warnings.
func (o *Options) prepare(res *Result, L int) (string, LayerOptions, error) {
	if o.Method == "" {
		o.Method = MethodData
	}
	if err := o.Validate(); err != nil {
		return "", LayerOptions{}, fmt.Errorf("compress: %w", err)
	}
	mode := "keep"
	switch {
	case o.Ranks != nil:
		mode = "ranks"
		if len(o.Ranks) != L {
			return "", LayerOptions{}, fmt.Errorf("compress: %d ranks given for a network of %d layers: %w", len(o.Ranks), L, ErrInput)
		}
		for i, r := range o.Ranks {
			if r < 0 {
				return "", LayerOptions{}, fmt.Errorf("compress: rank of layer %d is %d; ranks must be ≥ 0 (0 keeps the layer dense): %w", i, r, ErrInput)
			}
		}
		res.Selection = fmt.Sprintf("fixed ranks %v", o.Ranks)
	case o.Energy != 0:
		mode = "energy"
		if !(o.Energy > 0 && o.Energy <= 1) {
			return "", LayerOptions{}, fmt.Errorf("compress: energy must lie in (0, 1], got %g: %w", o.Energy, ErrInput)
		}
		res.Selection = fmt.Sprintf("energy %g per layer", o.Energy)
	case o.TargetError != 0:
		mode = "target"
		if !(o.TargetError > 0) || math.IsInf(o.TargetError, 0) {
			return "", LayerOptions{}, fmt.Errorf("compress: target error must be positive, got %g: %w", o.TargetError, ErrInput)
		}
		res.Selection = fmt.Sprintf("relative layer error ≤ %g", o.TargetError)
	default:
		if o.Keep == 0 {
			o.Keep = 0.5
		}
		if !(o.Keep > 0 && o.Keep <= 1) {
			return "", LayerOptions{}, fmt.Errorf("compress: the fraction of parameters kept must lie in (0, 1], got %g: %w", o.Keep, ErrInput)
		}
		if o.Allocation == "" {
			o.Allocation = AllocGlobal
		}
		res.Selection = fmt.Sprintf("keep %g of the parameters (%s allocation)", o.Keep, o.Allocation)
	}
	lo := o.Layer
	if lo.Bias == "" {
		lo.Bias = BiasCenter
	}
	if (o.Method == MethodConvex || o.Method == MethodReLU) && lo.Convex.MaxRows == 0 {
		lo.Convex.MaxRows = 2000
		if lo.ReLU.Constraint.MaxRows == 0 {
			lo.ReLU.Constraint.MaxRows = 2000
		}
	}
	if o.Method == MethodSVDLLM && o.Sequential {
		res.Warnings = append(res.Warnings, "svd-llm whitens with the original activations (X̌ = X); the sequential flag does not apply")
	}
	res.Method = o.Method
	return mode, lo, nil
}

// newLayerCost is the parameter accounting of a d×d2 layer (with or
// without a bias) under the method and bias mode.
func newLayerCost(dd, d2 int, bias bool, method Method, lo LayerOptions) layerCost {
	c := layerCost{perRank: dd + d2, dense: denseParams(dd, d2, bias), maxRank: min(dd, d2)}
	switch {
	case methodUsesBiasMode(method) && lo.Bias == BiasAugment:
		c.perRank++
	case methodRefitsBias(method, lo.Bias) || bias:
		c.fixed = d2
	}
	return c
}

// layerStep is one layer's compression problem as the driver poses it.
type layerStep struct {
	index int
	prob  Problem
	cost  layerCost
	// mode is the rank-selection mode of prepare; rank the layer's rank
	// for "keep" (the allocation's) and "ranks" (the caller's), 0 = dense.
	mode string
	rank int
	// pre is a fit on the original activations to reuse when X̌ = X, or
	// nil.
	pre *Fit
}

// layerOutcome is what fitStep decided: a dense layer — the original, or
// refit (weight out × in and bias, PyTorch layout) when non-nil — or the
// factorization f.
type layerOutcome struct {
	dense bool
	refit *nn.Layer
	f     Factored
}

// fitStep fits one layer at the rank its mode gives and fills the rank,
// parameters, energy and solver evidence of rep; a rank that would not
// save parameters keeps the layer dense (with a warning for fixed ranks,
// appended to warnings). With X̌ given and MethodData, a layer kept dense
// that has a bias is refit by least squares on X̌ (Alg 3 applied to every
// layer).
func (o *Options) fitStep(s layerStep, lo LayerOptions, rep *LayerReport, warnings *[]string) (layerOutcome, error) {
	i, prob, cost := s.index, s.prob, s.cost
	dd, d2 := prob.W.Dims()
	r := s.rank
	keepDense := false
	switch s.mode {
	case "keep":
		keepDense = r == 0
	case "ranks":
		keepDense = r == 0
		if r > 0 && !cost.worthFactoring(min(r, cost.maxRank)) {
			keepDense = true
			*warnings = append(*warnings, fmt.Sprintf("layer %d: rank %d would store %d ≥ %d parameters of the dense layer; kept dense", i, r, cost.factoredParams(r), cost.dense))
		}
	default:
		r = 0
	}
	var fit *Fit
	if !keepDense {
		lo2 := lo
		lo2.Rank = r
		if s.pre != nil && prob.Xc == nil {
			fit = s.pre
		} else {
			var err error
			fit, err = FitLayer(prob, o.Method, lo2)
			if err != nil {
				return layerOutcome{}, fmt.Errorf("layer %d: %w", i, err)
			}
		}
		switch s.mode {
		case "energy":
			r = rankForEnergy(fit.S, o.Energy)
		case "target":
			curve := fit.errorCurve(prob)
			r = len(curve)
			for k, e := range curve {
				if math.Sqrt(e/fit.Norm2) <= o.TargetError {
					r = k + 1
					break
				}
			}
		}
		r = min(r, fit.MaxRank())
		if (s.mode == "energy" || s.mode == "target") && !cost.worthFactoring(r) {
			keepDense = true
		}
		rep.Whitening = fit.Whitening
		rep.Iterations, rep.Converged = fit.Iterations, fit.Converged
		rep.Warnings = append(rep.Warnings, fit.Warnings...)
	}
	var out layerOutcome
	if keepDense && prob.Xc != nil && o.Method == MethodData && prob.Bias != nil {
		// Alg 3 applied to every layer: a layer kept dense is still
		// refit on the compressed network's own inputs — the full-rank
		// data-driven fit, i.e. least squares of the original
		// pre-activations on them — which undoes part of the upstream
		// compression error at no cost in parameters. (Layers without
		// a bias are left as they are: the refit would add one.)
		lo2 := lo
		lo2.Rank = min(dd, d2)
		full, err := FitLayer(prob, MethodData, lo2)
		if err != nil {
			return layerOutcome{}, fmt.Errorf("layer %d (dense refit): %w", i, err)
		}
		if g := full.Rank(min(dd, d2, full.MaxRank())); g.Rank() > 0 {
			lay := g.Layers(prob.Act)
			merged := (&nn.MLP{Layers: lay[:]}).Merge().Layers[0]
			out.refit = &merged
			rep.Whitening = full.Whitening
			rep.Warnings = append(rep.Warnings, full.Warnings...)
		}
	}
	if keepDense {
		out.dense = true
		rep.Dense = true
		rep.Params = cost.dense
		rep.Refit = out.refit != nil
		rep.Energy = 1
		return out, nil
	}
	out.f = fit.Rank(r)
	rep.Rank = out.f.Rank()
	rep.Params = out.f.Params()
	rep.Energy = energyAt(fit.S, rep.Rank)
	return out, nil
}

// denseOutputs returns the pre-activations of the dense layer lay (weight
// out × in) on the compressed and on the original inputs.
func denseOutputs(lay nn.Layer, xc, xo *mat.Dense) (yc, ycLocal *mat.Dense) {
	wt := mat.DenseCopyOf(lay.Weight.T())
	return preact(xc, wt, lay.Bias), preact(xo, wt, lay.Bias)
}

// allocateLayers splits budget over the weight layers of a CNN or a graph
// (sur: the layers as an MLP's, weights out × in; ws, xs, ys: their row-
// convention weights, calibration inputs and pre-activations) for the
// "keep" mode: by measured fits for AllocSVDLLM2 (returned as pre, to
// reuse, unless the method refits them), else from the spectra.
func (o *Options) allocateLayers(ctx context.Context, sur *nn.MLP, ws, xs, ys []*mat.Dense, costs []layerCost, budget int, lo LayerOptions) (ranks []int, pre []*Fit, err error) {
	if o.Allocation == AllocSVDLLM2 {
		fits, err := originalFits(ctx, sur, ws, xs, ys, costs, o.Method, lo)
		if err != nil {
			return nil, nil, err
		}
		if ranks, _, err = allocateMeasured(costs, nil, fits, budget, o.Allocation); err != nil {
			return nil, nil, err
		}
		if o.Method != MethodConvex && o.Method != MethodReLU {
			pre = fits
		}
		return ranks, pre, nil
	}
	spectra, err := allocationSpectra(ctx, sur, ws, xs, ys, o.Method, lo)
	if err != nil {
		return nil, nil, err
	}
	ranks, _, err = allocate(costs, spectra, budget, o.Allocation)
	return ranks, nil, err
}
