package compress

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// The layer-by-layer driver (Alg 3), shared by every kind of network.
//
// A network enters the driver as a layerSource: the list of its weight
// layers, each a matrix layer Y = X·W + b in the row convention (a conv is
// its Out × In·KH·KW matrix on unfolded patches, a graph's MatMul its
// weight on the rows of the activations that reach it); the original
// network's calibration inputs and pre-activations of every layer; the
// compressed network's inputs of the next layer; and a write-back that
// puts a layer's fit into the compressed network. compressLayers does the
// rest once for all of them: the rank-selection mode and the options'
// defaults (prepare), the parameter accounting, the allocation of a global
// budget, each layer's fit at its rank (fitStep), its errors, the report,
// distillation and the final checks.
//
// A new kind of network needs one adapter file. Copy cnn.go: a type that
// implements layerSource (cnnSource) and a CompressX that checks the
// network and the calibration data (checkCalibration) and calls
// compressLayers. mlp.go is the adapter that also implements wholeNetwork
// (measured allocations, held-out errors, distillation); graph.go the one
// whose write-back rewrites a graph, and which implements prober (the
// measured allocations).

// layerSource is a network that compressLayers compresses, one weight
// layer at a time. compressLayers calls layers, then stream, then input
// and write once per layer in order, then model.
type layerSource interface {
	// kind names the network in messages: "CNN", "graph".
	kind() string
	// original is the network being compressed.
	original() nn.Network
	// layers lists the weight layers to compress, in the order the data
	// reach them; an error wraps ErrInput when there is none.
	layers() ([]sourceLayer, error)
	// stream returns every layer's calibration inputs (rows) and
	// pre-activations in the original network fed x0.
	stream(ctx context.Context, x0 *mat.Dense) (xs, ys []*mat.Dense, err error)
	// input returns layer j's calibration inputs in the compressed network
	// built so far, or nil where they are the original ones; fit reports
	// whether the fit uses them (Options.Sequential), and a source may
	// return nil without computing them when it does not.
	input(j int, fit bool) (*mat.Dense, error)
	// write puts the fit of layer j into the compressed network; yc is the
	// fitted layer's pre-activations on the inputs input returned (the
	// original ones when nil).
	write(j int, out layerOutcome, yc *mat.Dense, rep *LayerReport) error
	// model is the compressed network, after the last write.
	model() nn.Network
}

// prober is implemented by a source that can measure the network's output
// with one layer compressed (an MLP, a graph): it takes the measured
// allocations (AllocSensitivity, AllocASVD).
type prober interface {
	// probe measures the output error with one layer compressed; refit as
	// newProbe's, where the source supports it.
	probe(costs []layerCost, fits []*Fit, refit bool) *probe
}

// wholeNetwork is implemented by a source whose whole network compressLayers
// can run on any inputs (an MLP): it takes held-out errors
// (Options.Holdout, computed by its write) and the distillation
// DistillOptions.Auto chooses.
type wholeNetwork interface {
	prober
	distiller
}

// distiller is implemented by a source whose compressed network can be
// fit end to end (an MLP, a graph).
type distiller interface {
	// distill fits the compressed network end to end to the original's
	// outputs (Options.Distill).
	distill(ctx context.Context, o DistillOptions, progress func(string, int, int)) (*DistillReport, error)
}

// sourceLayer is one weight layer of a layerSource.
type sourceLayer struct {
	// w (in × out) and bias give the pre-activations X·w + b, act follows.
	w    *mat.Dense
	bias []float64
	act  nn.Activation
	// index is the layer's place in the original network
	// (LayerReport.Layer); name, if not empty, prefixes its errors.
	index int
	name  string
}

// checkCalibration checks the calibration inputs x0 of a network with in
// inputs; takes describes them for the message ("the network takes 784
// inputs").
func checkCalibration(x0 *mat.Dense, in int, takes string) error {
	if x0 == nil {
		return fmt.Errorf("compress: no calibration data: %w", ErrInput)
	}
	if _, d := x0.Dims(); d != in {
		return fmt.Errorf("compress: calibration data has %d columns but %s: %w", d, takes, ErrInput)
	}
	return finite("calibration data", x0)
}

// compressLayers compresses every layer of src from calibration inputs x0
// (checked) into res, which may already hold warnings; start is when the
// compression began (Result.Elapsed).
func compressLayers(ctx context.Context, src layerSource, x0 *mat.Dense, o Options, res *Result, start time.Time) error {
	res.Sequential = o.Sequential
	whole, _ := src.(wholeNetwork)
	if whole == nil && o.Holdout != nil {
		res.Warnings = append(res.Warnings, errs.Message{"held-out per-layer errors are not computed for a " + src.kind() + "; ", errs.Option{Struct: "Options", Field: "Holdout"}, " was ignored"})
	}
	dist, _ := src.(distiller)
	if dist == nil && o.Distill.Epochs > 0 && !o.Distill.Auto {
		return fmt.Errorf("%w: %w", errs.Options(nil, "compress: distillation (", errs.Option{Struct: "Options", Field: "Distill"}, ") is implemented for MLPs and graphs, not for a "+src.kind()+"; compress without it"), ErrInput)
	}
	layers, err := src.layers()
	if err != nil {
		return err
	}
	L := len(layers)
	if o.Allocation == AllocAuto {
		keep := o.Keep
		if keep == 0 {
			keep = 0.5 // prepare's default
		}
		_, canProbe := src.(prober)
		o.Allocation = o.Allocation.Resolve(canProbe, keep)
	}
	mode, lo, err := o.prepare(res, L)
	if err != nil {
		return err
	}
	pr, _ := src.(prober)
	if mode == modeKeep && o.Allocation.probes() && pr == nil {
		return fmt.Errorf("compress: the %s allocation measures the network's output and is not available for a %s; use %s, %s or %s: %w",
			o.Allocation, src.kind(), AllocGlobal, AllocUniform, AllocSVDLLM2, ErrInput)
	}
	res.DenseParams = src.original().NumParams()
	res.DenseMultiplyAdds = src.original().MultiplyAdds()
	res.CalibrationRows, _ = x0.Dims()

	probs, err := originalProblems(ctx, src, layers, x0)
	if err != nil {
		return err
	}
	// other counts the parameters outside the weight layers, kept as they
	// are.
	costs := make([]layerCost, L)
	other := res.DenseParams
	for j, p := range probs {
		d, d2 := p.W.Dims()
		costs[j] = newLayerCost(d, d2, p.Bias != nil, o.Method, lo)
		other -= costs[j].dense
	}
	var ranks []int
	var pre []*Fit // fits on the original activations, reusable where X̌ = X
	if mode == modeKeep {
		res.Budget = int(math.Floor(o.Keep * float64(res.DenseParams)))
		if ranks, pre, res.Profiles, err = o.allocateRanks(ctx, pr, probs, matrixTypes(layers), costs, res.Budget-other, lo); err != nil {
			return err
		}
	}

	res.Params = other
	for j, l := range layers {
		step := layerStep{index: j, prob: probs[j], cost: costs[j], mode: mode}
		switch mode {
		case modeKeep:
			step.rank = ranks[j]
		case modeRanks:
			step.rank = o.Ranks[j]
		}
		if pre != nil {
			step.pre = pre[j]
		}
		if err := o.compressLayer(ctx, src, l, step, lo, res); err != nil {
			return err
		}
		if o.Progress != nil {
			o.Progress("compress", j+1, L)
		}
	}
	if dist != nil && o.Distill.applies(res.Params, res.DenseParams) {
		if res.Distill, err = dist.distill(ctx, o.Distill, o.Progress); err != nil {
			return err
		}
	}
	return finish(res, src, start)
}

// originalProblems returns each layer's problem on the original network's
// stream (X̌ = X).
func originalProblems(ctx context.Context, src layerSource, layers []sourceLayer, x0 *mat.Dense) ([]Problem, error) {
	xs, ys, err := src.stream(ctx, x0)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	probs := make([]Problem, len(layers))
	for j, l := range layers {
		probs[j] = Problem{W: l.w, Bias: l.bias, Act: l.act, X: xs[j], y: ys[j]}
	}
	return probs, nil
}

// allocateRanks splits budget over the layers for modeKeep: by
// measured fits for the measured allocations (returned as pre, to reuse,
// unless the method's fits depend on the rank; a probe of pr, which
// reports its profiles, for AllocSensitivity and AllocASVD; the
// theoretical truncation losses and the matrix types for AllocSVDLLM2),
// else from the spectra.
func (o *Options) allocateRanks(ctx context.Context, pr prober, probs []Problem, types []string, costs []layerCost, budget int, lo LayerOptions) (ranks []int, pre []*Fit, profiles []RankProfile, err error) {
	if !o.Allocation.measured() {
		spectra, err := allocationSpectra(ctx, probs, o.Method, lo)
		if err != nil {
			return nil, nil, nil, err
		}
		ranks, _, err = allocate(costs, spectra, budget, o.Allocation)
		return ranks, nil, nil, err
	}
	fits, err := originalFits(ctx, probs, costs, o.Method, lo)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.Allocation == AllocSVDLLM2 {
		// The theoretical truncation loss is SVD-LLM's minimum of
		// ‖XW − XŴ‖_F, whatever method then fits the layers.
		losses := fits
		if o.Method != MethodSVDLLM && o.Method != MethodSVDLLM2 {
			if losses, err = originalFits(ctx, probs, costs, MethodSVDLLM2, lo); err != nil {
				return nil, nil, nil, err
			}
		}
		ranks, _, err = allocateSVDLLM2(costs, losses, types, budget)
	} else {
		// Sequential data-driven compression refits the later layers on
		// the compressed stream; the measurement does too.
		p := pr.probe(costs, fits, o.Sequential && o.Method == MethodData)
		ranks, err = measuredAllocation(ctx, p, budget, o.Allocation)
		profiles = p.profiles()
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if o.Method != MethodConvex && o.Method != MethodReLU {
		pre = fits
	}
	return ranks, pre, profiles, nil
}

// compressLayer fits layer l (step: its problem on the original stream),
// measures its errors and writes it back, adding its report to res.
func (o *Options) compressLayer(ctx context.Context, src layerSource, l sourceLayer, step layerStep, lo LayerOptions, res *Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	j, xo, yo := step.index, step.prob.X, step.prob.y
	fitXc := o.Sequential && o.Method.FitsCompressedInputs()
	xc, err := src.input(j, fitXc)
	if err != nil {
		return err
	}
	switch {
	case xc == nil:
		xc = xo
	case fitXc:
		step.prob.Xc = xc
	}
	d, d2 := l.w.Dims()
	rep := LayerReport{Layer: l.index, In: d, Out: d2, DenseParams: step.cost.dense, MaxRank: min(d, d2), Converged: true}
	out, err := o.fitStep(step, lo, &rep, &res.Warnings)
	if err != nil {
		if l.name != "" {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		return err
	}
	var yc, ycLocal *mat.Dense
	if out.dense {
		w, b := l.w, l.bias
		if out.refit != nil {
			w, b = mat.DenseCopyOf(out.refit.Weight.T()), out.refit.Bias
		}
		yc, ycLocal = preact(xc, w, b), preact(xo, w, b)
	} else {
		yc, ycLocal = out.f.Apply(xc), out.f.Apply(xo)
	}
	yn := math.Max(mat.Norm(yo, 2), 1e-300)
	rep.Error = diffNorm(yo, yc) / yn
	rep.LocalError = diffNorm(yo, ycLocal) / yn
	if err := src.write(j, out, yc, &rep); err != nil {
		return err
	}
	rep.Seconds = time.Since(start).Seconds()
	res.Params += rep.Params
	res.Layers = append(res.Layers, rep)
	return nil
}

// finish checks the compressed network against the layers' reports and
// fills the totals of res.
func finish(res *Result, src layerSource, start time.Time) error {
	m := src.model()
	if err := m.Validate(); err != nil {
		return fmt.Errorf("compress: internal error: the compressed %s is invalid: %v", src.kind(), err)
	}
	if p := m.NumParams(); p != res.Params {
		return fmt.Errorf("compress: internal error: the compressed %s has %d parameters, the layers report %d", src.kind(), p, res.Params)
	}
	res.MultiplyAdds = m.MultiplyAdds()
	res.Kept = float64(res.Params) / float64(res.DenseParams)
	if res.Budget > 0 && res.Params > res.Budget {
		// allocate guarantees this; a violation is a bug, not bad input.
		return fmt.Errorf("compress: internal error: %d parameters exceed the budget of %d", res.Params, res.Budget)
	}
	res.Elapsed = time.Since(start)
	return nil
}

// rankMode is how each layer's rank is chosen: by exactly one of
// Options.Keep, Ranks, Energy and TargetError (prepare).
type rankMode int

const (
	// modeKeep splits the global budget Options.Keep by Options.Allocation.
	modeKeep rankMode = iota
	// modeRanks takes the ranks of Options.Ranks.
	modeRanks
	// modeEnergy keeps a fraction Options.Energy of each layer's spectrum.
	modeEnergy
	// modeTarget reaches the relative layer error Options.TargetError.
	modeTarget
)

// prepare completes and checks the options for a network of L weight
// layers: the method's default, the rank-selection mode and the per-layer
// solver options. It fills res.Selection, res.Method and res.Warnings.
func (o *Options) prepare(res *Result, L int) (rankMode, LayerOptions, error) {
	if o.Method == "" {
		o.Method = MethodData
	}
	if err := o.Validate(); err != nil {
		return 0, LayerOptions{}, fmt.Errorf("compress: %w", err)
	}
	mode := modeKeep
	switch {
	case o.Ranks != nil:
		mode = modeRanks
		if len(o.Ranks) != L {
			return 0, LayerOptions{}, fmt.Errorf("compress: %d ranks given for a network of %d layers: %w", len(o.Ranks), L, ErrInput)
		}
		for i, r := range o.Ranks {
			if r < 0 {
				return 0, LayerOptions{}, fmt.Errorf("compress: rank of layer %d is %d; ranks must be ≥ 0 (0 keeps the layer dense): %w", i, r, ErrInput)
			}
		}
		res.Selection = fmt.Sprintf("fixed ranks %v", o.Ranks)
	case o.Energy != 0:
		mode = modeEnergy
		if !(o.Energy > 0 && o.Energy <= 1) {
			return 0, LayerOptions{}, fmt.Errorf("compress: energy must lie in (0, 1], got %g: %w", o.Energy, ErrInput)
		}
		res.Selection = fmt.Sprintf("energy %g per layer", o.Energy)
	case o.TargetError != 0:
		mode = modeTarget
		if !(o.TargetError > 0) || math.IsInf(o.TargetError, 0) {
			return 0, LayerOptions{}, fmt.Errorf("compress: target error must be positive, got %g: %w", o.TargetError, ErrInput)
		}
		res.Selection = fmt.Sprintf("relative layer error ≤ %g", o.TargetError)
	default:
		if o.Keep == 0 {
			o.Keep = 0.5
		}
		if !(o.Keep > 0 && o.Keep <= 1) {
			return 0, LayerOptions{}, fmt.Errorf("compress: the fraction of parameters kept must lie in (0, 1], got %g: %w", o.Keep, ErrInput)
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
	if !o.Method.FitsCompressedInputs() && o.Sequential {
		res.Warnings = append(res.Warnings, errs.Message{string(o.Method) + " whitens with the original activations (X̌ = X); the sequential flag does not apply"})
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
	// for modeKeep (the allocation's) and modeRanks (the caller's), 0 =
	// dense.
	mode rankMode
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
func (o *Options) fitStep(s layerStep, lo LayerOptions, rep *LayerReport, warnings *[]errs.Message) (layerOutcome, error) {
	i, prob, cost := s.index, s.prob, s.cost
	dd, d2 := prob.W.Dims()
	r := s.rank
	keepDense := false
	switch s.mode {
	case modeKeep:
		keepDense = r == 0
	case modeRanks:
		keepDense = r == 0
		if r > 0 && !cost.worthFactoring(min(r, cost.maxRank)) {
			keepDense = true
			*warnings = append(*warnings, errs.Textf("layer %d: rank %d would store %d ≥ %d parameters of the dense layer; kept dense", i, r, cost.factoredParams(r), cost.dense))
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
		case modeEnergy:
			r = rankForEnergy(fit.S, o.Energy)
		case modeTarget:
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
		if (s.mode == modeEnergy || s.mode == modeTarget) && !cost.worthFactoring(r) {
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
