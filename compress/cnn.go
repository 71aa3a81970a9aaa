package compress

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
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
	// state-dict prefix), Kind ModuleConv2d or ModuleLinear.
	Module int           `json:"module"`
	Kind   CNNModuleKind `json:"kind"`
	Kernel []int         `json:"kernel,omitempty"`
	// Rows is the number of calibration rows the layer was fit on: sampled
	// patches for a conv (at most ConvPatchRows of Patches), images for a
	// Linear.
	Rows    int `json:"rows"`
	Patches int `json:"patches,omitempty"`
}

// CNNModuleKind is the kind of a compressed CNN module (CNNModule.Kind).
type CNNModuleKind string

// The kinds of compressed CNN modules.
const (
	ModuleConv2d CNNModuleKind = "conv2d"
	ModuleLinear CNNModuleKind = "linear"
)

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
	wt     *mat.Dense // w transposed, the row convention
	bias   []float64
	act    nn.Activation
	in     nn.FeatureShape
	rows   []int // sampled patch rows (conv), nil = all rows
	all    int   // all patch rows (conv)
	xs     *mat.Dense
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
	if m, ok := mergeFactoredCNN(net); ok {
		net = m
		res.Warnings = append(res.Warnings, errs.Message{"the network holds factored layers; they were multiplied out before compression"})
	}
	if err := checkCalibration(x0, net.In(), fmt.Sprintf("the network takes %d inputs (%v)", net.In(), net.Input)); err != nil {
		return nil, err
	}
	src := &cnnSource{net: net}
	if err := compressLayers(ctx, src, x0, o, &res.Result, start); err != nil {
		return nil, err
	}
	res.Model, res.Modules = src.out, src.modules
	return res, nil
}

// cnnSource is a sequential CNN as a layerSource: its Conv2d and Linear
// modules, a conv on its unfolded patches; the modules between them are
// copied into the compressed network as they are.
type cnnSource struct {
	net    *nn.CNN
	shapes []nn.FeatureShape // the input shape of every module
	wls    []*cnnWeightLayer
	// hc is the compressed stream, the output of the modules before
	// net.Layers[cur]; same reports that it is still the original one.
	hc      *mat.Dense
	same    bool
	cur     int
	mods    []nn.CNNLayer
	modules []CNNModule
	out     *nn.CNN
}

func (s *cnnSource) kind() string { return "CNN" }

func (s *cnnSource) original() nn.Network { return s.net }

func (s *cnnSource) layers() ([]sourceLayer, error) {
	shapes, err := s.net.Shapes()
	if err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	s.shapes = shapes
	var out []sourceLayer
	for p, l := range s.net.Layers {
		wl := &cnnWeightLayer{module: p, in: shapes[p], act: nn.Identity}
		switch l := l.(type) {
		case *nn.Conv2d:
			wl.conv, wl.w, wl.bias = l, l.Weight, l.Bias
		case *nn.Linear:
			wl.w, wl.bias = l.Weight, l.Bias
		default:
			continue
		}
		if p+1 < len(s.net.Layers) {
			if _, ok := s.net.Layers[p+1].(*nn.ReLULayer); ok {
				wl.act = nn.ReLU
			}
		}
		wl.wt = mat.DenseCopyOf(wl.w.T())
		s.wls = append(s.wls, wl)
		out = append(out, sourceLayer{w: wl.wt, bias: wl.bias, act: wl.act, index: p, name: cnnLayerName(wl)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("compress: the CNN has no Conv2d or Linear layer to compress: %w", ErrInput)
	}
	return out, nil
}

// stream runs the original network once: each weight layer's calibration
// inputs (sampled patches for a conv) and pre-activations.
func (s *cnnSource) stream(ctx context.Context, x0 *mat.Dense) (xs, ys []*mat.Dense, err error) {
	n, _ := x0.Dims()
	s.hc, s.same = x0, true
	h, cur := x0, 0
	for _, wl := range s.wls {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		h = runModules(s.net.Layers[cur:wl.module], s.shapes[cur], h)
		cur = wl.module
		if wl.conv != nil {
			out := s.shapes[wl.module+1]
			wl.all = n * out.H * out.W
			if wl.all > ConvPatchRows {
				wl.rows = samplePatchRows(wl.all, ConvPatchRows, uint64(wl.module))
			}
		}
		if wl.xs, err = layerRows(wl, h); err != nil {
			return nil, nil, err
		}
		xs = append(xs, wl.xs)
		ys = append(ys, preact(wl.xs, wl.wt, wl.bias))
	}
	return xs, ys, nil
}

// input runs the compressed stream through the modules before layer j
// (copying them into the compressed network) and unfolds it once it
// differs from the original.
func (s *cnnSource) input(j int, _ bool) (*mat.Dense, error) {
	wl := s.wls[j]
	between := s.net.Layers[s.cur:wl.module]
	s.hc = runModules(between, s.shapes[s.cur], s.hc)
	for _, l := range between {
		s.mods = append(s.mods, cloneModule(l))
	}
	s.cur = wl.module + 1
	if s.same {
		return nil, nil
	}
	return layerRows(wl, s.hc)
}

// write replaces the module by the dense (possibly refit) layer or the
// factored pair, and after the last one copies the modules that follow.
func (s *cnnSource) write(j int, step layerOutcome, _ *mat.Dense, _ *LayerReport) error {
	wl := s.wls[j]
	var repl []nn.CNNLayer
	if step.dense {
		w, b := mat.DenseCopyOf(wl.w), cloneVec(wl.bias)
		if step.refit != nil {
			w, b = step.refit.Weight, step.refit.Bias
			s.same = false
		}
		if wl.conv != nil {
			c := *wl.conv
			c.Weight, c.Bias = w, b
			repl = []nn.CNNLayer{&c}
		} else {
			repl = []nn.CNNLayer{&nn.Linear{Weight: w, Bias: b}}
		}
	} else {
		f := step.f
		v, u := mat.DenseCopyOf(f.A.T()), mat.DenseCopyOf(f.B.T())
		if wl.conv != nil {
			pair := nn.FactorConv(wl.conv, v, u, cloneVec(f.InBias), cloneVec(f.Bias))
			repl = []nn.CNNLayer{pair[0], pair[1]}
		} else {
			repl = []nn.CNNLayer{&nn.Linear{Weight: v, Bias: cloneVec(f.InBias)}, &nn.Linear{Weight: u, Bias: cloneVec(f.Bias)}}
		}
		s.same = false
	}
	s.mods = append(s.mods, repl...)
	m := CNNModule{Module: wl.module, Kind: ModuleLinear, Rows: wl.xs.RawMatrix().Rows}
	if wl.conv != nil {
		m.Kind, m.Kernel, m.Patches = ModuleConv2d, wl.conv.Kernel[:], wl.all
	}
	s.modules = append(s.modules, m)
	if j+1 < len(s.wls) {
		s.hc = runModules(repl, s.shapes[wl.module], s.hc)
		return nil
	}
	for _, l := range s.net.Layers[s.cur:] {
		s.mods = append(s.mods, cloneModule(l))
	}
	s.out = &nn.CNN{Input: s.net.Input, Layers: s.mods}
	return nil
}

func (s *cnnSource) model() nn.Network { return s.out }

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
