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

// Options controls CompressMLP, CompressCNN and CompressGraph.
// DefaultOptions is the best measured recipe, what `relurec compress` runs
// without flags; the zero value is the cheap path (FastOptions, `relurec
// compress --fast`): sequential off, method "data" (Alg 2c), half of the
// parameters kept with the global allocation, no distillation.
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
	// Allocation is how Keep is split over layers: AllocGlobal (the zero
	// value's), AllocUniform, AllocSensitivity (measured end-to-end error), AllocAuto
	// (sensitivity where it can be measured), or the baselines AllocASVD
	// and AllocSVDLLM2 (see Allocations).
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
	// layer-by-layer fit (knowledge distillation, no labels; MLPs and graphs).
	// Off in the zero value (it is not part of Zhang & Saab's algorithm);
	// DefaultOptions turns it on where it helps (DistillOptions.Auto).
	Distill DistillOptions
	// AutoMaxKeep is the largest Keep at which the recipe's measured steps
	// run: AllocAuto's sensitivity allocation and DistillOptions.Auto's
	// distillation. 0 means DefaultAutoMaxKeep; DefaultOptions sets
	// GraphAutoMaxKeep for a graph.
	AutoMaxKeep float64
	// Progress, if non-nil, is called as layers complete (stage, done,
	// total).
	Progress func(stage string, done, total int)
}

// DefaultOptions returns the best measured recipe for the budget on net,
// what `relurec compress` runs without flags: the data-driven fit (Alg
// 2c), the sequential fit (Alg 3) for an MLP or a graph, and at budgets up
// to AutoMaxKeep — where they were measured to help — the split by
// measured sensitivity (AllocAuto) and distillation (DistillOptions.Auto:
// DefaultDistillEpochs epochs for an MLP, GraphDistillEpochs for a graph);
// above, the global allocation alone. A CNN is fit non-sequentially, as it
// was measured (docs/compress.md), and AllocAuto and Auto reduce to the
// global allocation without distillation there. On three PyTorch-trained
// Fashion-MNIST MLPs at keep 0.05 the recipe lost 1.6 points of test
// accuracy where FastOptions lost 10.6, in 2–3× the time; on three
// ViTs it lost at most 2.0 points at keep 0.3 (docs/compress.md,
// "Defaults" and "Transformer encoders").
func DefaultOptions(net nn.Network) Options {
	_, mlp := net.(*nn.MLP)
	_, graph := net.(*nn.Graph)
	o := Options{Method: MethodData, Sequential: mlp || graph, Keep: 0.5, Allocation: AllocAuto,
		Distill: DistillOptions{Epochs: DefaultDistillEpochs, Auto: true}}
	if graph {
		o.AutoMaxKeep, o.Distill.Epochs = GraphAutoMaxKeep, GraphDistillEpochs
	}
	return o
}

// DefaultAutoMaxKeep is Options.AutoMaxKeep's default, measured on three
// Fashion-MNIST MLPs: up to it the sensitivity allocation and distillation
// each beat the layer fit with the global allocation significantly (keep
// 0.05, 0.1, 0.2); from 0.3 up neither improved on it, while the probes
// cost several times the layer fit and the distillation 37–62 s.
const DefaultAutoMaxKeep = 0.25

// GraphAutoMaxKeep is DefaultOptions' Options.AutoMaxKeep for a graph:
// on three Fashion-MNIST ViTs the sequential fit with the global
// allocation alone lost 4.5 points at keep 0.3 where the recipe lost
// 1.7–2.0, and at keep 0.5 distillation gained on every seed measured
// (docs/compress.md, "Transformer encoders").
const GraphAutoMaxKeep = 0.5

// AutoMax returns AutoMaxKeep or, when it is 0, DefaultAutoMaxKeep.
func (o Options) AutoMax() float64 {
	if o.AutoMaxKeep == 0 {
		return DefaultAutoMaxKeep
	}
	return o.AutoMaxKeep
}

// FastOptions returns the cheap path (`relurec compress --fast`, and the
// meaning of the zero Options): every layer fit once on the original
// network's activations, the global allocation, no distillation.
func FastOptions() Options {
	return Options{Method: MethodData, Keep: 0.5, Allocation: AllocGlobal}
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
	Distill *DistillReport `json:"distill,omitempty"`
	// Warnings name the options they refer to apart from their text
	// (errs.Message); their String and JSON are the library's text.
	Warnings []errs.Message `json:"warnings,omitempty"`
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
	res := &Result{}
	if net.HasFactored() {
		net = net.Merge()
		res.Warnings = append(res.Warnings, errs.Message{"the network holds factored layers; they were multiplied out before compression"})
	}
	if err := checkCalibration(x0, net.In(), fmt.Sprintf("the network takes %d inputs", net.In())); err != nil {
		return nil, err
	}
	if o.Holdout != nil {
		if _, hd := o.Holdout.Dims(); hd != net.In() {
			return nil, fmt.Errorf("compress: held-out data has %d columns but the network takes %d: %w", hd, net.In(), ErrInput)
		}
		if err := finite("held-out data", o.Holdout); err != nil {
			return nil, err
		}
	}
	src := &mlpSource{net: net, out: &nn.MLP{}, ho: o.Holdout, hc: o.Holdout}
	if err := compressLayers(ctx, src, x0, o, res, start); err != nil {
		return nil, err
	}
	res.Model = src.out
	return res, nil
}

// mlpSource is an MLP as a layerSource: every layer in turn, each fed the
// previous one's output. It is a wholeNetwork.
type mlpSource struct {
	net *nn.MLP
	x0  *mat.Dense
	// ws are the row-convention weights; xs (one more: the output) and ys
	// the original network's stream on x0.
	ws, xs, ys []*mat.Dense
	// out is the compressed network, xc its stream (the next layer's
	// inputs); ho and hc the original and compressed streams on
	// Options.Holdout (nil without).
	out    *nn.MLP
	xc     *mat.Dense
	ho, hc *mat.Dense
}

func (s *mlpSource) kind() string { return "MLP" }

func (s *mlpSource) original() nn.Network { return s.net }

func (s *mlpSource) layers() ([]sourceLayer, error) {
	out := make([]sourceLayer, len(s.net.Layers))
	s.ws = make([]*mat.Dense, len(s.net.Layers))
	for i, l := range s.net.Layers {
		s.ws[i] = mat.DenseCopyOf(l.Weight.T())
		out[i] = sourceLayer{w: s.ws[i], bias: l.Bias, act: l.Act, index: i}
	}
	return out, nil
}

func (s *mlpSource) stream(_ context.Context, x0 *mat.Dense) (xs, ys []*mat.Dense, err error) {
	L := len(s.net.Layers)
	s.x0, s.xc = x0, x0
	s.xs, s.ys = make([]*mat.Dense, L+1), make([]*mat.Dense, L)
	s.xs[0] = x0
	for i, l := range s.net.Layers {
		s.ys[i] = preact(s.xs[i], s.ws[i], l.Bias)
		s.xs[i+1] = activate(s.ys[i], l.Act)
	}
	return s.xs[:L], s.ys, nil
}

// input is the compressed stream, computed as each layer is written: from
// the second layer on, even where it still equals the original, so that
// with Sequential every later layer is fit on it (and one kept dense with
// a bias is refit, fitStep).
func (s *mlpSource) input(j int, _ bool) (*mat.Dense, error) {
	if j == 0 {
		return nil, nil
	}
	return s.xc, nil
}

// write appends the layer (two for a factored one), advances the
// compressed stream and, with Options.Holdout, reports the layer's
// held-out error.
func (s *mlpSource) write(j int, step layerOutcome, yc *mat.Dense, rep *LayerReport) error {
	l := s.net.Layers[j]
	if step.dense {
		lay := nn.Layer{Weight: mat.DenseCopyOf(l.Weight), Bias: cloneVec(l.Bias), Act: l.Act}
		if step.refit != nil {
			lay = *step.refit
		}
		s.out.Layers = append(s.out.Layers, lay)
	} else {
		lay := step.f.Layers(l.Act)
		s.out.Layers = append(s.out.Layers, lay[0], lay[1])
	}
	if s.ho != nil {
		hyo := preact(s.ho, s.ws[j], l.Bias)
		var hyc *mat.Dense
		if step.dense {
			last := s.out.Layers[len(s.out.Layers)-1]
			hyc = preact(s.hc, mat.DenseCopyOf(last.Weight.T()), last.Bias)
		} else {
			hyc = step.f.Apply(s.hc)
		}
		e := diffNorm(hyo, hyc) / math.Max(mat.Norm(hyo, 2), 1e-300)
		rep.HeldoutError = &e
		s.ho, s.hc = activate(hyo, l.Act), activate(hyc, l.Act)
	}
	s.xc = activate(yc, l.Act)
	return nil
}

func (s *mlpSource) model() nn.Network { return s.out }

func (s *mlpSource) probe(costs []layerCost, fits []*Fit, refit bool) *probe {
	return newProbe(s.net, s.ws, s.xs, s.ys, costs, fits, refit)
}

func (s *mlpSource) distill(ctx context.Context, o DistillOptions, progress func(string, int, int)) (*DistillReport, error) {
	return distill(ctx, s.net, mlpStudent(s.out), s.x0, o, progress)
}

// methodUsesBiasMode reports whether the method honours LayerOptions.Bias.
func methodUsesBiasMode(method Method) bool {
	return method == MethodData || method == MethodConvex || method == MethodReLU
}

// methodRefitsBias reports whether the method stores a dense bias even for
// a layer without one.
func methodRefitsBias(method Method, bias BiasMode) bool {
	if method == MethodOutputPCA {
		return true
	}
	return methodUsesBiasMode(method) && bias != BiasKeep && bias != BiasAugment
}

// allocationSpectra returns, per layer, the singular values the global
// allocation ranks on: those of W (svd), of S·W (asvd), and otherwise of the
// centred pre-activations of the original network on the calibration data
// (which equal Alg 2c's spectrum with X̌ = X of full column rank, TestOutputPCA).
func allocationSpectra(ctx context.Context, probs []Problem, method Method, lo LayerOptions) ([][]float64, error) {
	out := make([][]float64, len(probs))
	for i, p := range probs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch method {
		case MethodSVD, MethodASVD:
			f, err := FitLayer(Problem{W: p.W, Bias: p.Bias, Act: p.Act, X: p.X}, method, lo)
			if err != nil {
				return nil, fmt.Errorf("layer %d: %w", i, err)
			}
			out[i] = f.S
		default:
			g := gram(centered(p.y, colMeans(p.y)))
			var e mat.EigenSym
			if !e.Factorize(g, false) {
				return nil, fmt.Errorf("compress: layer %d: eigenvalues of the output covariance did not converge", i)
			}
			vals := e.Values(nil) // ascending
			s := make([]float64, len(vals))
			for k := range vals {
				s[k] = math.Sqrt(math.Max(vals[len(vals)-1-k], 0))
			}
			d, d2 := p.W.Dims()
			out[i] = s[:min(len(s), min(d, d2))]
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
