package compress

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// DistillOptions tunes the end-to-end distillation that can follow the
// layer-by-layer fit (Options.Distill). The zero value turns it off.
//
// This step is not in Zhang & Saab: their guarantees are per layer, and at
// small budgets the errors of the layers compound (docs/compress.md,
// "Fidelity without fine-tuning"). Distillation fits all factors at once to
// the original network's output on the same unlabelled calibration inputs —
// the network compresses itself with no labels, as the layer fit does — and
// keeps the layer fit whenever it does not improve the held-out match.
type DistillOptions struct {
	// Epochs of minibatch Adam over the calibration rows; 0 = no
	// distillation.
	Epochs int
	// Auto distils only where it was measured to help: an MLP or a graph
	// whose layer fit keeps at most Options.AutoMaxKeep of its parameters.
	// Elsewhere (and on a CNN) the step is skipped without error; without
	// Auto, Epochs > 0 distils an MLP or a graph (its factors and their
	// biases) and is an error on a CNN.
	Auto bool
	// LearningRate is Adam's step size on a cosine schedule; default
	// DefaultDistillLR.
	LearningRate float64
	// Temperature of both softmaxes (train.DistillOptions); default 4.
	Temperature float64
	// Objective is train.DistillOptions.Objective: "softmax" or "logits"
	// (the squared error of the outputs). Default "softmax" for an MLP and
	// "logits" for a graph, whose outputs need not be class logits.
	Objective train.Objective
	// BatchSize; default 128.
	BatchSize int
	// HoldoutFraction of the calibration rows, the last ones, is kept out
	// of training for early stopping; default 0.1 (at least one row).
	HoldoutFraction float64
	// Seed orders the minibatches.
	Seed uint64
}

// DefaultDistillLR is DistillOptions.LearningRate's default (and the CLI's
// --distill-lr).
const DefaultDistillLR = 2e-3

// DefaultDistillEpochs is DefaultOptions' number of epochs: on the
// Fashion-MNIST MLPs of docs/compress.md 30 epochs of 10 000 rows recover
// most of what the layer fit loses at keep 0.05–0.2, for about 10 s.
const DefaultDistillEpochs = 30

// GraphDistillEpochs is DefaultOptions' number of epochs for a graph: on
// the Fashion-MNIST ViTs of docs/compress.md, 10 epochs of 4096 images
// take about half of the minute the whole compression may.
const GraphDistillEpochs = 10

// applies reports whether the distillation runs on a compressed network
// that can be distilled (an MLP, a graph) keeping params of dense
// parameters, with Options.AutoMaxKeep maxKeep.
func (o DistillOptions) applies(params, dense int, maxKeep float64) bool {
	if o.Epochs <= 0 {
		return false
	}
	return !o.Auto || float64(params) <= maxKeep*float64(dense)
}

func (o DistillOptions) withDefaults() DistillOptions {
	if o.LearningRate == 0 {
		o.LearningRate = DefaultDistillLR
	}
	if o.Temperature == 0 {
		o.Temperature = 4
	}
	if o.BatchSize == 0 {
		o.BatchSize = 128
	}
	if o.HoldoutFraction == 0 {
		o.HoldoutFraction = 0.1
	}
	return o
}

// objectiveName is DistillOptions.Objective with the default spelled out.
func objectiveName(o train.Objective) string {
	return string(cmp.Or(o, train.ObjectiveSoftmax))
}

// validate checks the options that do not need the data.
func (o DistillOptions) validate() error {
	switch {
	case o.Epochs < 0:
		return errs.InvalidOption("DistillOptions", "Epochs", "must be ≥ 0 (0 = no distillation), got %d", o.Epochs)
	case o.Epochs == 0:
		return nil
	case !(o.LearningRate > 0) || math.IsInf(o.LearningRate, 0):
		return errs.InvalidOption("DistillOptions", "LearningRate", "must be positive and finite, got %g", o.LearningRate)
	case !(o.Temperature > 0) || math.IsInf(o.Temperature, 0):
		return errs.InvalidOption("DistillOptions", "Temperature", "must be positive and finite, got %g", o.Temperature)
	case o.BatchSize < 0:
		return errs.InvalidOption("DistillOptions", "BatchSize", "must be positive, got %d", o.BatchSize)
	case !(o.HoldoutFraction > 0 && o.HoldoutFraction < 1):
		return errs.InvalidOption("DistillOptions", "HoldoutFraction", "must lie in (0, 1), got %g", o.HoldoutFraction)
	}
	return train.CheckObjective(o.Objective)
}

// DistillReport is the evidence of the distillation step. Divergences are
// the objective train.Distill minimises (by default T²·KL between the original
// and compressed networks' tempered softmax plus ½ the squared difference
// of the rows' mean logits), agreements the fraction of rows on which both predict the same class,
// on the held-out calibration rows, before and after.
type DistillReport struct {
	Epochs      int `json:"epochs"`
	BestEpoch   int `json:"best_epoch"` // 0: the layer fit was kept
	TrainRows   int `json:"train_rows"`
	HoldoutRows int `json:"holdout_rows"`
	// Objective, Temperature and LearningRate as used ("softmax" or
	// "logits": the divergences below are that objective's).
	Objective       string  `json:"objective"`
	Temperature     float64 `json:"temperature"`
	LearningRate    float64 `json:"learning_rate"`
	StartDivergence float64 `json:"start_divergence"`
	Divergence      float64 `json:"divergence"`
	StartAgreement  float64 `json:"start_agreement"`
	Agreement       float64 `json:"agreement"`
	Seconds         float64 `json:"seconds"`
}

// Distill is the distillation step of CompressMLP on its own: it fits the
// compressed network res.Model in place to the original network net's
// logits on the calibration rows x0, keeping the epoch with the lowest
// divergence on the last HoldoutFraction of the rows, and sets res.Distill.
// It lets a caller score the layer fit and then the same fit distilled
// without compressing twice. net and x0 must be those res was compressed
// from (net multiplied out if it held factored layers); o.Epochs must be
// positive. Errors caused by the input wrap ErrInput.
func Distill(ctx context.Context, net *nn.MLP, res *Result, x0 *mat.Dense, o DistillOptions) error {
	if o.Epochs <= 0 {
		return fmt.Errorf("%w: %w", errs.Options(nil, "compress: Distill needs ", errs.Option{Struct: "DistillOptions", Field: "Epochs"}, fmt.Sprintf(" > 0, got %d", o.Epochs)), ErrInput)
	}
	if err := o.withDefaults().validate(); err != nil {
		return err
	}
	if err := CheckNetwork(net); err != nil {
		return err
	}
	if x0 == nil || res == nil || res.Model == nil {
		return fmt.Errorf("compress: Distill needs a compression result and its calibration data: %w", ErrInput)
	}
	if _, d := x0.Dims(); d != net.In() || res.Model.In() != net.In() || res.Model.Out() != net.Out() {
		return fmt.Errorf("compress: Distill: the network (%d→%d), its compression (%d→%d) and the calibration data (%d columns) do not match: %w",
			net.In(), net.Out(), res.Model.In(), res.Model.Out(), d, ErrInput)
	}
	rep, err := distill(ctx, net, mlpStudent(res.Model), x0, o, nil)
	if err != nil {
		return err
	}
	res.Distill = rep
	return nil
}

// student is a compressed network distill fits: its outputs, and the fit
// (train.Distill or train.DistillGraph on its trained parameters).
type student struct {
	net nn.Network
	fit func(ctx context.Context, x, teacher *mat.Dense, o train.DistillOptions) (*train.Result, error)
}

// mlpStudent is a compressed MLP as a student: every weight and bias,
// the factors balanced first.
func mlpStudent(c *nn.MLP) student {
	return student{net: c, fit: func(ctx context.Context, x, teacher *mat.Dense, o train.DistillOptions) (*train.Result, error) {
		c.BalanceFactors()
		return train.Distill(ctx, c, x, teacher, o)
	}}
}

// distill fits the compressed network c in place to the original net's
// outputs on the calibration rows x0 (Options.Distill), keeping the epoch
// with the lowest divergence on the last HoldoutFraction of the rows.
func distill(ctx context.Context, net nn.Network, c student, x0 *mat.Dense, o DistillOptions, progress func(string, int, int)) (*DistillReport, error) {
	start := time.Now()
	o = o.withDefaults()
	n, d := x0.Dims()
	hold := max(1, int(math.Round(o.HoldoutFraction*float64(n))))
	if n-hold < 1 {
		return nil, fmt.Errorf("compress: distillation needs at least 2 calibration rows (one to train on, one held out), got %d: %w", n, ErrInput)
	}
	xt := x0.Slice(0, n-hold, 0, d).(*mat.Dense)
	xh := x0.Slice(n-hold, n, 0, d).(*mat.Dense)
	zt, zh := net.Forward(xt), net.Forward(xh)
	before, err := metrics.CompareLogits(c.net.Forward(xh), zh, nil)
	if err != nil {
		return nil, err
	}
	tr, err := c.fit(ctx, xt, zt, train.DistillOptions{
		Options: train.Options{Epochs: o.Epochs, BatchSize: o.BatchSize, LearningRate: o.LearningRate, Seed: o.Seed,
			Progress: func(_ string, done, total int) {
				if progress != nil {
					progress("distill", done, total)
				}
			}},
		Temperature: o.Temperature, Objective: o.Objective, Holdout: xh, HoldoutTeacher: zh,
	})
	if err != nil {
		return nil, err
	}
	after, err := metrics.CompareLogits(c.net.Forward(xh), zh, nil)
	if err != nil {
		return nil, err
	}
	rep := &DistillReport{Epochs: o.Epochs, BestEpoch: tr.BestEpoch, TrainRows: n - hold, HoldoutRows: hold,
		Objective: objectiveName(o.Objective), Temperature: o.Temperature, LearningRate: o.LearningRate,
		StartDivergence: *tr.StartHoldoutLoss, Divergence: *tr.StartHoldoutLoss,
		StartAgreement: before.Agreement, Agreement: after.Agreement}
	if tr.BestEpoch > 0 {
		rep.Divergence = *tr.Epochs[tr.BestEpoch-1].HoldoutLoss
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}
