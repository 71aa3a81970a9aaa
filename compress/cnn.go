package compress

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// ConvPatchRows is the largest number of unfolded patch rows a conv layer
// is fit on. A conv layer's data are the patches under its kernel, Ho·Wo
// rows per image (784 per Fashion-MNIST image at the example's first conv,
// 196 at its second): 4096 calibration images give 3.2 million rows of 9
// and 0.8 million of 144 values. Beyond a few hundred rows per column the
// fit changes little (neighbouring patches overlap and are strongly
// correlated), while unfolding and keeping every row would cost 0.9 GB at
// the second conv. So a uniform random sample of this many rows (seeded,
// the same rows in the original and the compressed stream) is used when
// there are more: 227 rows per column at 144 columns, and the fit (QR of
// 32768 × 144, 1.4 GFLOP) costs little next to the forward passes.
const ConvPatchRows = 32768

// CNNModule describes the data of one compressed layer of a CNN.
type CNNModule struct {
	// Module is the layer's index in the original CNN's Layers (its
	// state-dict prefix), Kind "conv2d" or "linear".
	Module int    `json:"module"`
	Kind   string `json:"kind"`
	Kernel []int  `json:"kernel,omitempty"`
	// Rows is the number of calibration rows the layer was fit on: sampled
	// patches for a conv (at most ConvPatchRows of Patches), images for a
	// Linear.
	Rows    int `json:"rows"`
	Patches int `json:"patches,omitempty"`
}

// CNNResult is what CompressCNN returns. Result holds the same evidence as
// for an MLP, with one LayerReport per Conv2d or Linear (LayerReport.Layer
// is the module's index in the original CNN; In is In·KH·KW for a conv);
// its Model is nil and CalibrationRows counts images.
type CNNResult struct {
	Result
	// Model is the compressed network: each factored conv is a KH×KW conv
	// to r channels followed by a 1×1 conv (nn.FactorConv), each factored
	// Linear two Linear modules.
	Model   *nn.CNN     `json:"-"`
	Modules []CNNModule `json:"modules"`
}

// cnnWeightLayer is one Conv2d or Linear of the network being compressed,
// with its calibration problem on the original stream.
type cnnWeightLayer struct {
	module int
	conv   *nn.Conv2d // nil for a Linear
	w      *mat.Dense // out × in(·KH·KW), PyTorch layout
	bias   []float64
	act    nn.Activation
	in     nn.FeatureShape
	rows   []int // sampled patch rows (conv), nil = all rows
	all    int   // all patch rows (conv)
	xs, ys *mat.Dense
}

// CompressCNN compresses every Conv2d and Linear layer of a sequential CNN
// to low rank from calibration images x0 (rows, net.In() columns: one
// flattened C×H×W image each), without labels, gradients or fine-tuning,
// with the per-layer machinery of CompressMLP. A conv layer is its
// Out × (In·KH·KW) matrix acting on the unfolded patches under its kernel
// (nn.Unfold), so its data-driven fit is Alg 2 on those patch rows (a
// sample of ConvPatchRows of them when there are more), and a rank-r
// result is written back as two layers: the KH×KW conv to r channels, then
// a 1×1 conv (nn.FactorConv). With Sequential the inputs X̌ are the
// compressed network's own patches (Alg 3); targets are always the
// original network's pre-activations. The budget Keep counts every weight
// and bias of the Conv2d and Linear layers; Ranks has one entry per such
// layer, in order; a layer is factored only when its rank saves
// parameters, r·(In·KH·KW + Out) < Out·In·KH·KW (biases aside).
//
// The measured allocations AllocSensitivity and AllocASVD are not available
// (their probe runs an MLP); Holdout is ignored with a warning (the CLI
// reports test accuracy instead). A factored pair (a conv then a 1×1 conv,
// or two Linear modules, with nothing between) is multiplied out first,
// with a warning. Errors caused by the input wrap ErrInput.
func CompressCNN(ctx context.Context, net *nn.CNN, x0 *mat.Dense, o Options) (*CNNResult, error) {
	start := time.Now()
	if net == nil {
		return nil, fmt.Errorf("compress: no network: %w", ErrInput)
	}
	if err := net.Validate(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	res := &CNNResult{}
	res.Sequential = o.Sequential
	if m, ok := mergeFactoredCNN(net); ok {
		net = m
		res.Warnings = append(res.Warnings, "the network holds factored layers; they were multiplied out before compression")
	}
	if x0 == nil {
		return nil, fmt.Errorf("compress: no calibration data: %w", ErrInput)
	}
	n, d := x0.Dims()
	if d != net.In() {
		return nil, fmt.Errorf("compress: calibration data has %d columns but the network takes %d inputs (%v): %w", d, net.In(), net.Input, ErrInput)
	}
	if err := finite("calibration data", x0); err != nil {
		return nil, err
	}
	if o.Holdout != nil {
		res.Warnings = append(res.Warnings, "held-out per-layer errors are not computed for a CNN; Options.Holdout was ignored")
	}
	if o.Distill.Epochs > 0 {
		return nil, fmt.Errorf("compress: distillation (Options.Distill) is implemented for MLPs only, not for a CNN; compress without it: %w", ErrInput)
	}
	shapes, err := net.Shapes()
	if err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	var layers []*cnnWeightLayer
	for p, l := range net.Layers {
		wl := &cnnWeightLayer{module: p, in: shapes[p], act: nn.Identity}
		switch l := l.(type) {
		case *nn.Conv2d:
			wl.conv, wl.w, wl.bias = l, l.Weight, l.Bias
		case *nn.Linear:
			wl.w, wl.bias = l.Weight, l.Bias
		default:
			continue
		}
		if p+1 < len(net.Layers) {
			if _, ok := net.Layers[p+1].(*nn.ReLULayer); ok {
				wl.act = nn.ReLU
			}
		}
		layers = append(layers, wl)
	}
	L := len(layers)
	if L == 0 {
		return nil, fmt.Errorf("compress: the CNN has no Conv2d or Linear layer to compress: %w", ErrInput)
	}
	mode, lo, err := o.prepare(&res.Result, L)
	if err != nil {
		return nil, err
	}
	if mode == "keep" && (o.Allocation == AllocSensitivity || o.Allocation == AllocASVD) {
		return nil, fmt.Errorf("compress: the %s allocation measures an MLP's output and is not available for a CNN; use %s, %s or %s: %w",
			o.Allocation, AllocGlobal, AllocUniform, AllocSVDLLM2, ErrInput)
	}
	res.DenseParams = net.NumParams()
	res.DenseMultiplyAdds = net.MultiplyAdds()
	res.CalibrationRows = n

	// The original stream: each weight layer's calibration inputs (sampled
	// patches for a conv) and pre-activations, in one forward pass.
	ws := make([]*mat.Dense, L)
	xs := make([]*mat.Dense, L)
	ys := make([]*mat.Dense, L)
	costs := make([]layerCost, L)
	h, cur := x0, 0
	for j, wl := range layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h = runModules(net.Layers[cur:wl.module], shapes[cur], h)
		cur = wl.module
		if wl.conv != nil {
			out := shapes[wl.module+1]
			wl.all = n * out.H * out.W
			if wl.all > ConvPatchRows {
				wl.rows = samplePatchRows(wl.all, ConvPatchRows, uint64(wl.module))
			}
		}
		if wl.xs, err = layerRows(wl, h); err != nil {
			return nil, err
		}
		ws[j] = mat.DenseCopyOf(wl.w.T())
		wl.ys = preact(wl.xs, ws[j], wl.bias)
		xs[j], ys[j] = wl.xs, wl.ys
		out, k := wl.w.Dims()
		costs[j] = newLayerCost(k, out, wl.bias != nil, o.Method, lo)
	}

	var ranks []int
	var pre []*Fit
	if mode == "keep" {
		budget := int(math.Floor(o.Keep * float64(res.DenseParams)))
		res.Budget = budget
		// The layers as an MLP's (not a chain: each one's data are its own
		// rows), for the allocation code, which reads weights, biases and
		// activations only.
		sur := &nn.MLP{Layers: make([]nn.Layer, L)}
		for j, wl := range layers {
			sur.Layers[j] = nn.Layer{Weight: wl.w, Bias: wl.bias, Act: wl.act}
		}
		if ranks, pre, err = o.allocateLayers(ctx, sur, ws, xs, ys, costs, budget, lo); err != nil {
			return nil, err
		}
	}

	// The compressed stream, layer by layer.
	var mods []nn.CNNLayer
	hc, same := x0, true // same: hc is still the original stream
	cur = 0
	for j, wl := range layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lstart := time.Now()
		between := net.Layers[cur:wl.module]
		hc = runModules(between, shapes[cur], hc)
		for _, l := range between {
			mods = append(mods, cloneModule(l))
		}
		cur = wl.module + 1
		xo := xs[j]
		xc := xo
		if !same {
			if xc, err = layerRows(wl, hc); err != nil {
				return nil, err
			}
		}
		out, k := wl.w.Dims()
		rep := LayerReport{Layer: wl.module, In: k, Out: out, DenseParams: costs[j].dense, MaxRank: min(k, out), Converged: true}
		prob := Problem{W: ws[j], Bias: wl.bias, Act: wl.act, X: xo, y: ys[j]}
		if o.Sequential && o.Method != MethodSVDLLM && !same {
			prob.Xc = xc
		}
		r := 0
		switch mode {
		case "keep":
			r = ranks[j]
		case "ranks":
			r = o.Ranks[j]
		}
		var pf *Fit
		if pre != nil {
			pf = pre[j]
		}
		step, err := o.fitStep(layerStep{index: j, prob: prob, cost: costs[j], mode: mode, rank: r, pre: pf}, lo, &rep, &res.Warnings)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cnnLayerName(wl), err)
		}
		var yc, ycLocal *mat.Dense
		var repl []nn.CNNLayer
		if step.dense {
			w, b := mat.DenseCopyOf(wl.w), cloneVec(wl.bias)
			if step.refit != nil {
				w, b = step.refit.Weight, step.refit.Bias
				same = false
			}
			if wl.conv != nil {
				c := *wl.conv
				c.Weight, c.Bias = w, b
				repl = []nn.CNNLayer{&c}
			} else {
				repl = []nn.CNNLayer{&nn.Linear{Weight: w, Bias: b}}
			}
			yc, ycLocal = denseOutputs(nn.Layer{Weight: w, Bias: b}, xc, xo)
		} else {
			f := step.f
			v, u := mat.DenseCopyOf(f.A.T()), mat.DenseCopyOf(f.B.T())
			if wl.conv != nil {
				pair := nn.FactorConv(wl.conv, v, u, cloneVec(f.InBias), cloneVec(f.Bias))
				repl = []nn.CNNLayer{pair[0], pair[1]}
			} else {
				repl = []nn.CNNLayer{&nn.Linear{Weight: v, Bias: cloneVec(f.InBias)}, &nn.Linear{Weight: u, Bias: cloneVec(f.Bias)}}
			}
			yc, ycLocal = f.Apply(xc), f.Apply(xo)
			same = false
		}
		yn := math.Max(mat.Norm(ys[j], 2), 1e-300)
		rep.Error = diffNorm(ys[j], yc) / yn
		rep.LocalError = diffNorm(ys[j], ycLocal) / yn
		mods = append(mods, repl...)
		if j+1 < L {
			hc = runModules(repl, shapes[wl.module], hc)
		}
		rep.Seconds = time.Since(lstart).Seconds()
		res.Params += rep.Params
		res.Layers = append(res.Layers, rep)
		m := CNNModule{Module: wl.module, Kind: "linear", Rows: xo.RawMatrix().Rows}
		if wl.conv != nil {
			m.Kind, m.Kernel, m.Patches = "conv2d", wl.conv.Kernel[:], wl.all
		}
		res.Modules = append(res.Modules, m)
		if o.Progress != nil {
			o.Progress("compress", j+1, L)
		}
	}
	for _, l := range net.Layers[cur:] {
		mods = append(mods, cloneModule(l))
	}
	res.Model = &nn.CNN{Input: net.Input, Layers: mods}
	if err := res.Model.Validate(); err != nil {
		return nil, fmt.Errorf("compress: internal error: the compressed CNN is invalid: %v", err)
	}
	if p := res.Model.NumParams(); p != res.Params {
		return nil, fmt.Errorf("compress: internal error: the compressed CNN has %d parameters, the layers report %d", p, res.Params)
	}
	res.MultiplyAdds = res.Model.MultiplyAdds()
	res.Kept = float64(res.Params) / float64(res.DenseParams)
	if res.Budget > 0 && res.Params > res.Budget {
		return nil, fmt.Errorf("compress: internal error: %d parameters exceed the budget of %d", res.Params, res.Budget)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// cnnLayerName is "module 3 (Conv2d)" for errors.
func cnnLayerName(wl *cnnWeightLayer) string {
	if wl.conv != nil {
		return fmt.Sprintf("module %d (Conv2d)", wl.module)
	}
	return fmt.Sprintf("module %d (Linear)", wl.module)
}

// runModules pushes h (samples of shape in) through mods.
func runModules(mods []nn.CNNLayer, in nn.FeatureShape, h *mat.Dense) *mat.Dense {
	if len(mods) == 0 {
		return h
	}
	return (&nn.CNN{Input: in, Layers: mods}).Forward(h)
}

// layerRows returns the weight layer's calibration rows from its input h
// (samples of shape wl.in): h itself for a Linear; the unfolded patches
// for a conv, only rows wl.rows when set, unfolded a chunk of images at a
// time so that all of them never sit in memory.
func layerRows(wl *cnnWeightLayer, h *mat.Dense) (*mat.Dense, error) {
	if wl.conv == nil {
		return h, nil
	}
	if wl.rows == nil {
		return wl.conv.Unfold(h, wl.in)
	}
	n, d := h.Dims()
	_, k := wl.w.Dims()
	per := wl.all / n // patches per image
	out := mat.NewDense(len(wl.rows), k, nil)
	const chunk = 64
	j := 0
	for s0 := 0; s0 < n && j < len(wl.rows); s0 += chunk {
		s1 := min(s0+chunk, n)
		if wl.rows[j] >= s1*per {
			continue
		}
		u, err := wl.conv.Unfold(h.Slice(s0, s1, 0, d).(*mat.Dense), wl.in)
		if err != nil {
			return nil, err
		}
		for ; j < len(wl.rows) && wl.rows[j] < s1*per; j++ {
			copy(out.RawRowView(j), u.RawRowView(wl.rows[j]-s0*per))
		}
	}
	return out, nil
}

// samplePatchRows returns m distinct row indices of [0, n), ascending,
// uniformly at random (Floyd's algorithm) from a fixed seed, so that a run
// is reproducible.
func samplePatchRows(n, m int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(0x72656c75726563, seed))
	chosen := make(map[int]struct{}, m)
	out := make([]int, 0, m)
	for j := n - m; j < n; j++ {
		t := rng.IntN(j + 1)
		if _, ok := chosen[t]; ok {
			t = j
		}
		chosen[t] = struct{}{}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// cloneModule returns a deep copy of a CNN module.
func cloneModule(l nn.CNNLayer) nn.CNNLayer {
	switch l := l.(type) {
	case *nn.Conv2d:
		c := *l
		c.Weight, c.Bias = mat.DenseCopyOf(l.Weight), cloneVec(l.Bias)
		return &c
	case *nn.Linear:
		return &nn.Linear{Weight: mat.DenseCopyOf(l.Weight), Bias: cloneVec(l.Bias)}
	case *nn.MaxPool2d:
		p := *l
		return &p
	case *nn.ReLULayer:
		return &nn.ReLULayer{}
	case *nn.Flatten:
		return &nn.Flatten{}
	}
	panic(fmt.Sprintf("compress: unknown CNN module %T", l))
}

// mergeFactoredCNN multiplies out the factored pairs of net — a conv then a
// 1×1 conv with stride 1 and no padding, or two Linear modules, with
// nothing between them — into single layers: W = U·V and b = U·vb + ub. It
// returns the network and whether it merged anything.
func mergeFactoredCNN(net *nn.CNN) (*nn.CNN, bool) {
	var out []nn.CNNLayer
	merged := false
	for i := 0; i < len(net.Layers); i++ {
		l := net.Layers[i]
		if i+1 < len(net.Layers) {
			switch a := l.(type) {
			case *nn.Conv2d:
				if b, ok := net.Layers[i+1].(*nn.Conv2d); ok && pointwise(b) {
					c := *a
					c.Weight, c.Bias = mulFactors(b.Weight, a.Weight, b.Bias, a.Bias)
					out = append(out, &c)
					merged = true
					i++
					continue
				}
			case *nn.Linear:
				if b, ok := net.Layers[i+1].(*nn.Linear); ok {
					w, bias := mulFactors(b.Weight, a.Weight, b.Bias, a.Bias)
					out = append(out, &nn.Linear{Weight: w, Bias: bias})
					merged = true
					i++
					continue
				}
			}
		}
		out = append(out, l)
	}
	if !merged {
		return net, false
	}
	return &nn.CNN{Input: net.Input, Layers: out}, true
}

// pointwise reports whether c is a 1×1 conv with stride 1 and no padding.
func pointwise(c *nn.Conv2d) bool {
	s := c.Stride
	return c.Kernel == [2]int{1, 1} && (s[0] == 0 || s[0] == 1) && (s[1] == 0 || s[1] == 1) && c.Padding == [2]int{}
}

// mulFactors returns U·V and U·vb + ub (nil when both biases are nil).
func mulFactors(u, v *mat.Dense, ub, vb []float64) (*mat.Dense, []float64) {
	var w mat.Dense
	w.Mul(u, v)
	if ub == nil && vb == nil {
		return &w, nil
	}
	r, _ := u.Dims()
	b := make([]float64, r)
	if ub != nil {
		copy(b, ub)
	}
	if vb != nil {
		var t mat.VecDense
		t.MulVec(u, mat.NewVecDense(len(vb), vb))
		for i := range b {
			b[i] += t.AtVec(i)
		}
	}
	return &w, b
}
