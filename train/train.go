package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// ErrInput marks a caller's data or option that training cannot use: a
// label out of range, inputs of the wrong width, a non-positive batch
// size. It is the shared errs.ErrInput, so errors.Is matches it whichever
// package returned the error.
var ErrInput = errs.ErrInput

// Options controls the Adam loop of MLP, Distill and DistillGraph. The
// zero value works: 10 epochs of Adam (Kingma & Ba 2015) with minibatches
// of 128, learning rate 1e-3 on a cosine schedule, seed 0.
type Options struct {
	// Epochs is the number of passes over the data. Default 10.
	Epochs int
	// BatchSize is the number of samples per step. Default 128. The last,
	// smaller batch of an epoch also takes a step.
	BatchSize int
	// LearningRate is Adam's step size α at the start. Default 1e-3.
	LearningRate float64
	// Schedule is "cosine" (default: α·(1+cos(π·t/T))/2 over all T steps) or
	// "constant".
	Schedule string
	// Beta1, Beta2 and Epsilon are Adam's constants; defaults 0.9, 0.999,
	// 1e-8 (PyTorch's).
	Beta1, Beta2, Epsilon float64
	// WeightDecay is decoupled weight decay (AdamW, Loshchilov & Hutter 2019)
	// on weights, not biases: each step multiplies weights by 1 − α_t·λ.
	// Default 0.
	WeightDecay float64
	// Classes is the number of classes C: labels lie in [0, C) and the
	// network has C outputs (MLP checks both). 0 leaves it to the labels:
	// ClassCount then infers max(label)+1, at most MaxInferredClasses.
	Classes int
	// Seed seeds the order of the samples in each epoch. The same seed, data
	// and starting network give bit-identical results at any GOMAXPROCS.
	Seed uint64
	// Validation, if non-nil, is scored after every epoch (its Accuracy and
	// Loss go into EpochStats.Validation).
	Validation       *mat.Dense
	ValidationLabels []int
	// Progress, if non-nil, is called after every step with ("train",
	// steps done, total steps).
	Progress func(stage string, done, total int)
}

func (o Options) withDefaults() Options {
	if o.Epochs == 0 {
		o.Epochs = 10
	}
	if o.BatchSize == 0 {
		o.BatchSize = 128
	}
	if o.LearningRate == 0 {
		o.LearningRate = 1e-3
	}
	if o.Schedule == "" {
		o.Schedule = "cosine"
	}
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Epsilon == 0 {
		o.Epsilon = 1e-8
	}
	return o
}

// MaxInferredClasses is the largest class count ClassCount infers from the
// labels alone (Options.Classes = 0). A single stray label such as 1e6
// would otherwise size the output layer — and the memory of training — by
// that value.
const MaxInferredClasses = 1000

// classesOption is Options.Classes as a message names it, with value
// when the message tells what it is set to.
func classesOption(value string) errs.Option {
	return errs.Option{Struct: "Options", Field: "Classes", Value: value}
}

// ClassCount returns the number of classes C of a classifier trained on
// labels with o: Options.Classes when it is set, and every label must
// then lie in [0, C); otherwise max(label)+1, which must not exceed
// MaxInferredClasses. It is the check to run before sizing a network's
// output layer from the labels. Errors wrap ErrInput and name the offending
// label's value and row.
func (o Options) ClassCount(labels []int) (int, error) {
	if o.Classes < 0 {
		return 0, fmt.Errorf("%w: %w", errs.Options(nil, "nn: ", classesOption(""), fmt.Sprintf(" must be ≥ 0 (0 infers it from the labels), got %d", o.Classes)), ErrInput)
	}
	if len(labels) == 0 {
		return 0, fmt.Errorf("nn: no labels: %w", ErrInput)
	}
	classes := 0
	for i, l := range labels {
		switch {
		case l < 0:
			return 0, fmt.Errorf("nn: label %d at row %d is negative; labels are class indices 0 … C−1: %w", l, i, ErrInput)
		case o.Classes > 0 && l >= o.Classes:
			return 0, fmt.Errorf("%w: %w", errs.Options(nil, fmt.Sprintf("nn: label %d at row %d is outside [0, %d) for ", l, i, o.Classes), classesOption(strconv.Itoa(o.Classes))), ErrInput)
		case o.Classes == 0 && l >= MaxInferredClasses:
			return 0, fmt.Errorf("%w: %w", errs.Options(nil, fmt.Sprintf("nn: label %d at row %d would make %d classes, more than the %d inferred from the labels alone; set ", l, i, l+1, MaxInferredClasses), classesOption(""), " to the number of classes if that many are intended"), ErrInput)
		}
		classes = max(classes, l+1)
	}
	if o.Classes > 0 {
		return o.Classes, nil
	}
	return classes, nil
}

// MLPBytes estimates the memory MLP and the Evaluate after it take
// for a network of the given layer sizes (as NewMLP takes them) on n
// samples with opt, so that a caller can refuse sizes too large for the
// machine before it allocates the network: the network, Adam's two moments
// and the gradient (four values a parameter), a batch's inputs,
// activations and their gradients, and the chunks of rows Evaluate scores
// at once on all cores. The samples themselves are not counted.
func MLPBytes(sizes []int, n int, opt Options) float64 {
	opt = opt.withDefaults()
	if len(sizes) == 0 {
		return 0
	}
	batch := float64(max(min(opt.BatchSize, n), 0))
	var params, units float64
	for i := 0; i+1 < len(sizes); i++ {
		params += float64(sizes[i])*float64(sizes[i+1]) + float64(sizes[i+1])
		units += float64(sizes[i+1])
	}
	evaluated := float64(nn.EvaluateRows(n)) // rows scored at once
	return 8 * (4*params + batch*(float64(sizes[0])+2*units) + evaluated*units)
}

// EpochStats reports one epoch of training.
type EpochStats struct {
	Epoch int `json:"epoch"`
	// TrainLoss and TrainAccuracy average the minibatch losses and
	// accuracies of the epoch (measured before each step's update).
	TrainLoss     float64     `json:"train_loss"`
	TrainAccuracy float64     `json:"train_accuracy"`
	Validation    *nn.Metrics `json:"validation,omitempty"`
	// HoldoutLoss is Distill's divergence on DistillOptions.Holdout.
	HoldoutLoss  *float64 `json:"holdout_loss,omitempty"`
	LearningRate float64  `json:"learning_rate"` // at the epoch's end
	Seconds      float64  `json:"seconds"`
}

// Result is what MLP, Distill and DistillGraph return.
type Result struct {
	Epochs []EpochStats `json:"epochs"`
	// StartHoldoutLoss and BestEpoch report Distill's early stopping: the
	// held-out divergence before training and the epoch whose weights were
	// kept (0 = the starting network). Both are unset without a holdout.
	StartHoldoutLoss *float64      `json:"start_holdout_loss,omitempty"`
	BestEpoch        int           `json:"best_epoch,omitempty"`
	Steps            int           `json:"steps"`
	Elapsed          time.Duration `json:"elapsed"`
}

// MLP fits m in place to classify the rows of x (n×In) into labels in
// [0, Out) by minimising the mean softmax cross-entropy of its logits with
// minibatch Adam, exactly as torch.optim.Adam (or AdamW with WeightDecay)
// with bias correction does. Every layer must be ReLU or Identity; gradients
// are exact (back-propagation in float64). Each epoch visits the samples in
// an order drawn from Seed. Matrix products are gonum's, which split work
// into output blocks with a fixed summation order, so results do not depend
// on GOMAXPROCS.
//
// MLP honours ctx between steps; on cancellation it returns the statistics
// so far with ctx's error, leaving m at the last completed step. Errors
// caused by the data or options wrap ErrInput.
func MLP(ctx context.Context, m *nn.MLP, x *mat.Dense, labels []int, opt Options) (*Result, error) {
	opt = opt.withDefaults()
	if err := checkMLP("Train", m); err != nil {
		return nil, err
	}
	if err := checkTraining("Train", m, x, opt); err != nil {
		return nil, err
	}
	n, _ := x.Dims()
	if opt.Classes != 0 && opt.Classes != m.Out() {
		return nil, fmt.Errorf("%w: %w", errs.Options(nil, fmt.Sprintf("nn: Train: the network has %d outputs but ", m.Out()), classesOption(strconv.Itoa(opt.Classes))), ErrInput)
	}
	if err := nn.CheckLabels(labels, n, m.Out()); err != nil {
		return nil, err
	}
	batchLabels := make([]int, min(opt.BatchSize, n))
	return adamLoop(ctx, newMLPTrainer(m, min(opt.BatchSize, n)), x, opt, func(logits, grad *mat.Dense, idx []int) (float64, int) {
		lab := batchLabels[:len(idx)]
		for r, i := range idx {
			lab[r] = labels[i]
		}
		return nn.SoftmaxCrossEntropy(logits, lab, grad), nn.CountCorrect(logits, lab)
	}, nil)
}

// checkMLP checks that m is a valid network of ReLU and Identity layers,
// the ones MLP and Distill differentiate. fn names the caller in
// messages; errors wrap ErrInput.
func checkMLP(fn string, m *nn.MLP) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInput)
	}
	for i, l := range m.Layers {
		if l.Act != nn.ReLU && l.Act != nn.Identity {
			return fmt.Errorf("nn: %s: layer %d has activation %s; training supports relu and identity layers only: %w", fn, i, l.Act, ErrInput)
		}
	}
	return nil
}

// checkTraining checks what training any network m shares: inputs of its
// width, usable options and validation data. fn names the caller in
// messages; errors wrap ErrInput.
func checkTraining(fn string, m interface {
	In() int
	Out() int
}, x *mat.Dense, opt Options) error {
	if x == nil || x.IsEmpty() {
		return fmt.Errorf("nn: %s: the inputs x are nil or empty; expected n×%d (the network's input width): %w", fn, m.In(), ErrInput)
	}
	// The width, and finiteness: a NaN or Inf input would make every
	// epoch's loss NaN without an error.
	if _, _, err := certify.CheckMatrix("nn."+fn, "x", x, -1, m.In(), fmt.Sprintf("n×%d (the network's input width), all finite", m.In())); err != nil {
		return err
	}
	switch {
	case opt.Epochs < 0:
		return fmt.Errorf("nn: %s: Epochs must be ≥ 0, got %d: %w", fn, opt.Epochs, ErrInput)
	case opt.BatchSize < 0:
		return fmt.Errorf("nn: %s: BatchSize must be positive, got %d: %w", fn, opt.BatchSize, ErrInput)
	case !(opt.LearningRate > 0) || math.IsInf(opt.LearningRate, 0):
		return fmt.Errorf("nn: %s: LearningRate must be positive and finite, got %g: %w", fn, opt.LearningRate, ErrInput)
	case opt.Schedule != "cosine" && opt.Schedule != "constant":
		return fmt.Errorf("nn: %s: Schedule must be \"cosine\" or \"constant\", got %q: %w", fn, opt.Schedule, ErrInput)
	case !(opt.Beta1 >= 0 && opt.Beta1 < 1) || !(opt.Beta2 >= 0 && opt.Beta2 < 1) || !(opt.Epsilon > 0):
		return fmt.Errorf("nn: %s: need 0 ≤ Beta1, Beta2 < 1 and Epsilon > 0: %w", fn, ErrInput)
	case opt.WeightDecay < 0:
		return fmt.Errorf("nn: %s: WeightDecay must be ≥ 0, got %g: %w", fn, opt.WeightDecay, ErrInput)
	}
	if opt.Validation != nil {
		if _, vd := opt.Validation.Dims(); vd != m.In() {
			return fmt.Errorf("nn: %s: validation inputs have %d columns, training inputs %d: %w", fn, vd, m.In(), ErrInput)
		}
		vn, _ := opt.Validation.Dims()
		if err := nn.CheckLabels(opt.ValidationLabels, vn, m.Out()); err != nil {
			return fmt.Errorf("validation: %w", err)
		}
	}
	return nil
}

// batchLoss scores the logits of the samples idx (one row each, in order):
// it returns their mean loss and how many count as correct, and writes the
// loss's gradient with respect to the logits into grad (same shape).
type batchLoss func(logits, grad *mat.Dense, idx []int) (loss float64, correct int)

// trainable is a network adamLoop trains: an MLP (mlpTrainer) or chosen
// constants of a Graph (graphTrainer).
type trainable interface {
	In() int
	Out() int
	Forward(x *mat.Dense) *mat.Dense
	Evaluate(x *mat.Dense, labels []int) (nn.Metrics, error)
	// params lists the parameters, each with the slice gradient writes
	// its gradient into; they stay the same slices while it trains.
	params() []param
	// gradient computes the loss of the samples idx of x and its gradient
	// with respect to every parameter, and returns the mean loss and the
	// number of samples the loss counts as correct.
	gradient(x *mat.Dense, idx []int, loss batchLoss) (float64, int, error)
}

// param is one parameter slice of a trainable and its gradient.
type param struct {
	value, grad []float64
	// decay: Options.WeightDecay applies (weights, not biases).
	decay bool
}

// adamLoop is the minibatch Adam loop of MLP and Distill with the
// checked, defaulted options opt and the loss of a batch.
// afterEpoch, if non-nil, is called with each epoch's statistics before
// they are recorded.
func adamLoop(ctx context.Context, m trainable, x *mat.Dense, opt Options, loss batchLoss, afterEpoch func(*EpochStats)) (*Result, error) {
	start := time.Now()
	n, _ := x.Dims()
	bs := min(opt.BatchSize, n)
	perEpoch := (n + bs - 1) / bs
	total := perEpoch * opt.Epochs
	ps := m.params()
	ad := newAdam(ps)
	rng := rand.New(rand.NewPCG(opt.Seed, 0x747261696e)) // "train"
	perm := make([]int, n)
	res := &Result{}
	step := 0
	for ep := 0; ep < opt.Epochs; ep++ {
		epStart := time.Now()
		for i := range perm {
			perm[i] = i
		}
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var lossSum float64
		correct := 0
		lr := opt.LearningRate
		for b := 0; b < perEpoch; b++ {
			if err := ctx.Err(); err != nil {
				res.Steps = step
				res.Elapsed = time.Since(start)
				return res, err
			}
			idx := perm[b*bs : min((b+1)*bs, n)]
			l, ok, err := m.gradient(x, idx, loss)
			if err != nil {
				return nil, err
			}
			lossSum += l * float64(len(idx))
			correct += ok
			lr = opt.LearningRate
			if opt.Schedule == "cosine" && total > 1 {
				lr *= 0.5 * (1 + math.Cos(math.Pi*float64(step)/float64(total)))
			}
			step++
			ad.step(ps, lr, opt)
			if opt.Progress != nil {
				opt.Progress("train", step, total)
			}
		}
		st := EpochStats{
			Epoch:         ep + 1,
			TrainLoss:     lossSum / float64(n),
			TrainAccuracy: float64(correct) / float64(n),
			LearningRate:  lr,
		}
		if opt.Validation != nil {
			v, err := m.Evaluate(opt.Validation, opt.ValidationLabels)
			if err != nil {
				return nil, err
			}
			st.Validation = &v
		}
		if afterEpoch != nil {
			afterEpoch(&st)
		}
		st.Seconds = time.Since(epStart).Seconds()
		res.Epochs = append(res.Epochs, st)
	}
	res.Steps = step
	res.Elapsed = time.Since(start)
	return res, nil
}

// mlpTrainer is an MLP as a trainable: its weights and biases, and the
// workspace of a minibatch.
type mlpTrainer struct {
	*nn.MLP
	ws *workspace
}

func newMLPTrainer(m *nn.MLP, bs int) *mlpTrainer {
	return &mlpTrainer{MLP: m, ws: newWorkspace(m, bs)}
}

// params lists each weight row and each bias.
func (t *mlpTrainer) params() []param {
	var ps []param
	for i, l := range t.Layers {
		r, c := l.Weight.Dims()
		raw, gw := l.Weight.RawMatrix(), t.ws.dw[i].RawMatrix()
		for row := 0; row < r; row++ {
			ps = append(ps, param{value: raw.Data[row*raw.Stride : row*raw.Stride+c], grad: gw.Data[row*gw.Stride : row*gw.Stride+c], decay: true})
		}
		if l.Bias != nil {
			ps = append(ps, param{value: l.Bias, grad: t.ws.db[i]})
		}
	}
	return ps
}

func (t *mlpTrainer) gradient(x *mat.Dense, idx []int, loss batchLoss) (float64, int, error) {
	l, ok := t.ws.gradient(t.MLP, x, idx, loss)
	return l, ok, nil
}

// workspace holds one minibatch's activations and the gradients.
type workspace struct {
	xb *mat.Dense   // the batch's inputs
	h  []*mat.Dense // h[i] = output of layer i (after activation)
	g  []*mat.Dense // g[i] = dLoss/d(pre-activation of layer i)
	dw []*mat.Dense
	db [][]float64
}

func newWorkspace(m *nn.MLP, bs int) *workspace {
	L := len(m.Layers)
	ws := &workspace{
		xb: mat.NewDense(bs, m.In(), nil),
		h:  make([]*mat.Dense, L), g: make([]*mat.Dense, L),
		dw: make([]*mat.Dense, L), db: make([][]float64, L),
	}
	for i, l := range m.Layers {
		ws.h[i] = mat.NewDense(bs, l.Out(), nil)
		ws.g[i] = mat.NewDense(bs, l.Out(), nil)
		ws.dw[i] = mat.NewDense(l.Out(), l.In(), nil)
		ws.db[i] = make([]float64, l.Out())
	}
	return ws
}

// view returns the first r rows of a workspace matrix.
func rows(a *mat.Dense, r int) *mat.Dense {
	_, c := a.Dims()
	return a.Slice(0, r, 0, c).(*mat.Dense)
}

// gradient computes the loss on the samples idx and its gradient with respect
// to every weight and bias (into ws.dw, ws.db), and returns the mean loss and
// the number of samples the loss counts as correct.
func (ws *workspace) gradient(m *nn.MLP, x *mat.Dense, idx []int, lossOf batchLoss) (float64, int) {
	b := len(idx)
	_, d := x.Dims()
	xb := rows(ws.xb, b)
	for r, i := range idx {
		copy(xb.RawRowView(r), x.RawRowView(i)[:d])
	}
	in := xb
	for i, l := range m.Layers {
		z := rows(ws.h[i], b)
		z.Mul(in, l.Weight.T())
		raw := z.RawMatrix()
		for r := 0; r < b; r++ {
			row := raw.Data[r*raw.Stride : r*raw.Stride+raw.Cols]
			if l.Bias != nil {
				floats.Add(row, l.Bias)
			}
			if l.Act == nn.ReLU {
				for j, v := range row {
					if !(v > 0) {
						row[j] = 0
					}
				}
			}
		}
		in = z
	}
	L := len(m.Layers)
	logits := rows(ws.h[L-1], b)
	g := rows(ws.g[L-1], b)
	loss, ok := lossOf(logits, g, idx)
	if m.Layers[L-1].Act == nn.ReLU {
		maskReLU(g, logits)
	}
	for i := L - 1; i >= 0; i-- {
		l := m.Layers[i]
		prev := xb
		if i > 0 {
			prev = rows(ws.h[i-1], b)
		}
		ws.dw[i].Mul(g.T(), prev)
		if l.Bias != nil {
			db := ws.db[i]
			clear(db)
			for r := 0; r < b; r++ {
				floats.Add(db, g.RawRowView(r))
			}
		}
		if i > 0 {
			gp := rows(ws.g[i-1], b)
			gp.Mul(g, l.Weight)
			if m.Layers[i-1].Act == nn.ReLU {
				maskReLU(gp, prev)
			}
			g = gp
		}
	}
	return loss, ok
}

// maskReLU zeroes g where the ReLU output h is zero (ReLU'(0) = 0, as in
// PyTorch).
func maskReLU(g, h *mat.Dense) {
	r, c := g.Dims()
	for i := 0; i < r; i++ {
		gr, hr := g.RawRowView(i)[:c], h.RawRowView(i)[:c]
		for j, v := range hr {
			if !(v > 0) {
				gr[j] = 0
			}
		}
	}
}

// adam holds the first and second moment estimates of each parameter.
type adam struct {
	t    int
	m, v [][]float64
}

func newAdam(ps []param) *adam {
	a := &adam{}
	for _, p := range ps {
		a.m = append(a.m, make([]float64, len(p.value)))
		a.v = append(a.v, make([]float64, len(p.value)))
	}
	return a
}

// step applies one Adam update with learning rate lr to the parameters
// ps, from their gradients.
func (a *adam) step(ps []param, lr float64, o Options) {
	a.t++
	c1 := 1 - math.Pow(o.Beta1, float64(a.t))
	c2 := 1 - math.Pow(o.Beta2, float64(a.t))
	for i, p := range ps {
		decay := 1.0
		if p.decay {
			decay = 1 - lr*o.WeightDecay
		}
		mm, vv := a.m[i], a.v[i]
		for k, gk := range p.grad {
			mm[k] = o.Beta1*mm[k] + (1-o.Beta1)*gk
			vv[k] = o.Beta2*vv[k] + (1-o.Beta2)*gk*gk
			p.value[k] = p.value[k]*decay - lr*(mm[k]/c1)/(math.Sqrt(vv[k]/c2)+o.Epsilon)
		}
	}
}

// DistillOptions controls Distill: the Options of the Adam loop (their
// Classes field is ignored) and the temperature.
type DistillOptions struct {
	Options
	// Temperature T softens the teacher's and the student's softmax before
	// they are compared (Hinton, Vinyals & Dean 2015, "Distilling the
	// knowledge in a neural network"). Default 1. A large T approaches
	// matching the logits themselves (their mean-centred squared error).
	Temperature float64
	// Objective is what is matched: ObjectiveSoftmax (default) the tempered
	// softmax, by T²·KL as above, with each row's mean logit held at the
	// teacher's by ½(z̄ − t̄)² (the divergence ignores a shift of a whole
	// row, and without the term the logits drift away from the teacher's
	// while the predictions get closer); ObjectiveLogits the logits themselves, by
	// the mean of ½‖z − t‖² (logit regression, Ba & Caruana 2014).
	Objective Objective
	// Holdout and HoldoutTeacher, if set, are inputs and their teacher
	// logits kept out of training. The divergence on them is measured
	// before training and after every epoch (EpochStats.HoldoutLoss), and
	// Distill leaves m at the weights where it was lowest — the starting
	// network itself if no epoch improved on it (early stopping, so a
	// network that already matches its teacher is not made worse).
	Holdout, HoldoutTeacher *mat.Dense
}

// Distill fits m in place so that its softmax output on the rows of x
// matches the teacher logits (n × Out, e.g. the dense network's output on x):
// minibatch Adam, as MLP, on the mean Kullback–Leibler divergence
// T²·KL(softmax(t/T) ‖ softmax(z/T)) between the teacher's row t and the
// student's logits z, plus ½(z̄ − t̄)² on the rows' mean logits (the one
// direction the divergence is blind to), or on the logits' squared error
// (DistillOptions.Objective). No labels are needed — it is how a compressed network
// is fitted to the network it came from on unlabelled calibration data.
// EpochStats' TrainLoss is that objective and TrainAccuracy the fraction
// of samples whose largest logit is the teacher's. Same determinism and
// cancellation as MLP, except that with a Holdout a cancelled run, like a
// finished one, ends on the best held-out epoch's weights; errors wrap
// ErrInput.
func Distill(ctx context.Context, m *nn.MLP, x, teacher *mat.Dense, opt DistillOptions) (*Result, error) {
	if err := checkMLP("Distill", m); err != nil {
		return nil, err
	}
	n := 0
	if x != nil {
		n, _ = x.Dims()
	}
	return distill(ctx, "Distill", newMLPTrainer(m, max(1, min(opt.Options.withDefaults().BatchSize, n))), x, teacher, opt)
}

// distill is Distill on any trainable; fn names the caller in messages.
func distill(ctx context.Context, fn string, m trainable, x, teacher *mat.Dense, opt DistillOptions) (*Result, error) {
	opt.Options = opt.Options.withDefaults()
	if opt.Temperature == 0 {
		opt.Temperature = 1
	}
	if err := checkTraining(fn, m, x, opt.Options); err != nil {
		return nil, err
	}
	if !(opt.Temperature > 0) || math.IsInf(opt.Temperature, 0) {
		return nil, fmt.Errorf("nn: %s: Temperature must be positive and finite, got %g: %w", fn, opt.Temperature, ErrInput)
	}
	obj, err := opt.objective()
	if err != nil {
		return nil, err
	}
	n, _ := x.Dims()
	want := fmt.Sprintf("%d×%d, one row of logits per input and one column per output", n, m.Out())
	if _, _, err := certify.CheckMatrix("nn."+fn, "teacher", teacher, n, m.Out(), want); err != nil {
		return nil, err
	}
	keep, err := newBestWeights(fn, m, opt, obj)
	if err != nil {
		return nil, err
	}
	p, classes := obj.targets(teacher), nn.ArgmaxRows(teacher)
	bs := min(opt.BatchSize, n)
	_, pc := p.Dims()
	pb := mat.NewDense(bs, pc, nil)
	lab := make([]int, bs)
	res, err := adamLoop(ctx, m, x, opt.Options, func(logits, grad *mat.Dense, idx []int) (float64, int) {
		b := len(idx)
		for r, i := range idx {
			copy(pb.RawRowView(r), p.RawRowView(i))
			lab[r] = classes[i]
		}
		loss := obj.loss(logits, rows(pb, b), grad)
		return loss, nn.CountCorrect(logits, lab[:b])
	}, keep.epochEnd)
	if keep != nil && res != nil {
		keep.restore()
		res.StartHoldoutLoss, res.BestEpoch = &keep.start, keep.epoch
	}
	return res, err
}

// Objective names what distillation matches (DistillOptions.Objective).
type Objective string

// The distillation objectives; "" is ObjectiveSoftmax.
const (
	ObjectiveSoftmax Objective = "softmax"
	ObjectiveLogits  Objective = "logits"
)

// distillObjective is what Distill matches: targets turns teacher logits
// into the rows loss compares the student's logits with.
type distillObjective struct {
	targets func(teacher *mat.Dense) *mat.Dense
	loss    func(z, target, grad *mat.Dense) float64
}

// CheckObjective returns the error Distill gives for
// DistillOptions.Objective = name, nil for a valid one: callers check it
// before work that precedes the distillation.
func CheckObjective(name Objective) error {
	_, err := DistillOptions{Objective: name, Temperature: 1}.objective()
	return err
}

func (opt DistillOptions) objective() (distillObjective, error) {
	switch opt.Objective {
	case "", ObjectiveSoftmax:
		return distillObjective{targets: func(t *mat.Dense) *mat.Dense { return softTargetsAndMeans(t, opt.Temperature) },
			loss: func(z, pm *mat.Dense, g *mat.Dense) float64 { return softmaxAndMeanLoss(z, pm, opt.Temperature, g) }}, nil
	case ObjectiveLogits:
		return distillObjective{targets: func(t *mat.Dense) *mat.Dense { return t }, loss: LogitSquaredError}, nil
	}
	return distillObjective{}, fmt.Errorf("nn: Distill: Objective must be \"softmax\" or \"logits\", got %q: %w", opt.Objective, ErrInput)
}

// softTargetsAndMeans returns, per row of the teacher logits t, softmax(t/T)
// followed by the row's mean logit (n × (c+1)).
func softTargetsAndMeans(t *mat.Dense, temp float64) *mat.Dense {
	n, c := t.Dims()
	out := mat.NewDense(n, c+1, nil)
	for i := 0; i < n; i++ {
		row := out.RawRowView(i)
		softmaxInto(row[:c], t.RawRowView(i), temp)
		row[c] = floats.Sum(t.RawRowView(i)) / float64(c)
	}
	return out
}

// softmaxAndMeanLoss is the "softmax" objective of Distill on logits z
// (n×c) and targets pm from softTargetsAndMeans: the mean of
// T²·KL(p_i ‖ softmax(z_i/T)) + ½(z̄_i − t̄_i)², z̄ a row's mean logit. The
// divergence is blind to adding a constant to a row of logits (its gradient
// sums to zero over the row); the second term pins exactly that direction
// to the teacher's, so the student's logits stay at the teacher's level and
// the two terms never pull against each other.
func softmaxAndMeanLoss(z, pm *mat.Dense, temp float64, grad *mat.Dense) float64 {
	n, c := z.Dims()
	p := pm.Slice(0, n, 0, c).(*mat.Dense)
	loss := SoftCrossEntropy(z, p, temp, grad)
	inv := 1 / float64(n)
	var shift float64
	for i := 0; i < n; i++ {
		d := floats.Sum(z.RawRowView(i))/float64(c) - pm.At(i, c)
		shift += 0.5 * d * d
		if grad != nil {
			g := grad.RawRowView(i)
			for j := range g {
				g[j] += d / float64(c) * inv
			}
		}
	}
	return loss + shift*inv
}

// LogitSquaredError returns the mean ½‖z_i − t_i‖² over the rows of the
// n×c logits z and targets t, and, when grad is non-nil, writes its
// gradient (z − t)/n.
func LogitSquaredError(z, t, grad *mat.Dense) float64 {
	n, _ := z.Dims()
	inv := 1 / float64(n)
	var loss float64
	for i := 0; i < n; i++ {
		zr, tr := z.RawRowView(i), t.RawRowView(i)
		for j, v := range zr {
			d := v - tr[j]
			loss += d * d
			if grad != nil {
				grad.Set(i, j, d*inv)
			}
		}
	}
	return 0.5 * loss * inv
}

// bestWeights is Distill's early stopping: the lowest held-out divergence
// seen so far, the epoch it was seen after, and a copy of those
// parameters.
type bestWeights struct {
	m        trainable
	ps       []param
	x, p     *mat.Dense // held-out inputs and targets
	obj      distillObjective
	start    float64
	loss     float64
	epoch    int
	snapshot [][]float64
}

// newBestWeights checks the holdout of opt and records m as the best so far
// (epoch 0); it returns nil when opt has no holdout.
func newBestWeights(fn string, m trainable, opt DistillOptions, obj distillObjective) (*bestWeights, error) {
	if opt.Holdout == nil && opt.HoldoutTeacher == nil {
		return nil, nil
	}
	if opt.Holdout == nil || opt.HoldoutTeacher == nil {
		return nil, fmt.Errorf("nn: %s: Holdout and HoldoutTeacher go together; one of them is missing: %w", fn, ErrInput)
	}
	hn, _, err := certify.CheckMatrix("nn."+fn, "Holdout", opt.Holdout, -1, m.In(), fmt.Sprintf("n×%d (the network's input width)", m.In()))
	if err != nil {
		return nil, err
	}
	if _, _, err := certify.CheckMatrix("nn."+fn, "HoldoutTeacher", opt.HoldoutTeacher, hn, m.Out(), fmt.Sprintf("%d×%d, the teacher's logits of Holdout", hn, m.Out())); err != nil {
		return nil, err
	}
	b := &bestWeights{m: m, ps: m.params(), x: opt.Holdout, p: obj.targets(opt.HoldoutTeacher), obj: obj}
	b.start = b.divergence()
	b.loss = b.start
	for _, p := range b.ps {
		b.snapshot = append(b.snapshot, slices.Clone(p.value))
	}
	return b, nil
}

func (b *bestWeights) divergence() float64 {
	return b.obj.loss(b.m.Forward(b.x), b.p, nil)
}

// epochEnd measures the held-out divergence after an epoch and keeps the
// parameters if it is the lowest yet.
func (b *bestWeights) epochEnd(st *EpochStats) {
	if b == nil {
		return
	}
	l := b.divergence()
	st.HoldoutLoss = &l
	if l < b.loss {
		b.loss, b.epoch = l, st.Epoch
		for i, p := range b.ps {
			copy(b.snapshot[i], p.value)
		}
	}
}

// restore puts the best parameters back.
func (b *bestWeights) restore() {
	for i, p := range b.ps {
		copy(p.value, b.snapshot[i])
	}
}

// softmaxInto writes softmax(z/T) into dst and returns log Σ exp(z/T), both
// computed after subtracting the row's maximum.
func softmaxInto(dst, z []float64, temp float64) float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v/temp)
	}
	var sum float64
	for j, v := range z {
		dst[j] = math.Exp(v/temp - mx)
		sum += dst[j]
	}
	for j := range dst {
		dst[j] /= sum
	}
	return mx + math.Log(sum)
}

// SoftCrossEntropy returns the mean T²·KL(p_i ‖ softmax(z_i/T)) over the
// rows of the n×c logits z against the n×c target distributions p (rows
// summing to one), and, when grad is non-nil, writes its gradient with
// respect to z, T·(softmax(z_i/T) − p_i)/n. It is distillation's loss
// (Hinton et al. 2015; the T² keeps the gradient's scale independent of T);
// it is zero exactly when the student's tempered softmax equals the targets.
func SoftCrossEntropy(z, p *mat.Dense, temp float64, grad *mat.Dense) float64 {
	n, c := z.Dims()
	q := make([]float64, c)
	inv := 1 / float64(n)
	var loss float64
	for i := 0; i < n; i++ {
		lse := softmaxInto(q, z.RawRowView(i), temp)
		pr := p.RawRowView(i)
		zr := z.RawRowView(i)
		for j, pj := range pr {
			if pj > 0 {
				// p·(log p − log q), log q = z/T − lse.
				loss += pj * (math.Log(pj) - (zr[j]/temp - lse))
			}
		}
		if grad != nil {
			gr := grad.RawRowView(i)
			for j := range gr {
				gr[j] = temp * (q[j] - pr[j]) * inv
			}
		}
	}
	return loss * temp * temp * inv
}
