package experiment

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/train"
)

// Experiments for [ZS25] (Zhang & Saab, low-rank compression).

func init() {
	Register(Experiment{
		Name: "compress-fashion",
		Description: "Test accuracy versus the fraction of parameters kept (0.05 … 0.9) for every scalable compression method " +
			"(svd, asvd, svd-llm, output-pca, input-pca, data, data sequential) on a 784-512-256-10 ReLU MLP trained on " +
			"Fashion-MNIST by relurec (15 epochs of Adam, seed = --seed), 10 000 calibration images, no fine-tuning; " +
			"with --seeds N, N models (seeds --seed …) and their means. Also reports agreement with the dense model's " +
			"predictions, the relative logit error, and paired counts with McNemar's exact test against svd and asvd. " +
			"Needs the dataset-fashion-mnist package (scripts/install-datasets.sh).",
		Run: runCompressFashion,
	})
	Register(Experiment{
		Name: "compress-allocation",
		Description: "How the parameter budget is split over layers, for sequential data-driven compression of the " +
			"compress-fashion model (784-512-256-10, Fashion-MNIST, 15 epochs, seed = --seed): the global spectral rule, " +
			"uniform, the measured end-to-end sensitivity rule, ASVD's sensitivity threshold search and SVD-LLM V2's " +
			"truncation-loss ratios, at keeps 0.05 … 0.9, and the sensitivity fit followed by 30 epochs of distillation " +
			"to the dense model's outputs (relurec compress --distill 30, no labels); accuracy, agreement with the dense " +
			"model, logit error, and paired counts with McNemar's exact test of the distilled sensitivity fit against " +
			"each allocation.",
		Run: runCompressAllocation,
	})
	Register(Experiment{
		Name: "compress-rate",
		Description: "Theorem 3.1's error ‖X̌(M − M̂)‖_F²/(d1·d2) versus the number of calibration rows d1 for synthetic " +
			"layers Ỹ = X̌M + G (d=30, d2=50, rank 4, σ=0.5, X̌ ≠ X), rank-constrained least squares against " +
			"unconstrained least squares; the theorem predicts a log-log slope of −1 and the level r(d+d2)σ²/(d1d2).",
		Run: runCompressRate,
	})
	Register(Experiment{
		Name: "compress-estimators",
		Description: "The convex estimator (Alg 4, Theorem 4.4) and the ReLU-aware estimator (Alg 5, Theorem 4.9) against " +
			"least squares on synthetic layers (d1=300, d=30, d2=60, rank 2, α=1): with the paper's radius " +
			"and with the oracle radius τ = ‖X̌M‖_*, plus the theorems' bounds at these sizes.",
		Run: runCompressEstimators,
	})
}

// FashionRun is one compression of the compress-fashion experiment.
type FashionRun struct {
	Seed       uint64  `json:"seed"` // the seed of the trained model
	Method     string  `json:"method"`
	Sequential bool    `json:"sequential"`
	Allocation string  `json:"allocation,omitempty"`
	Keep       float64 `json:"keep"`
	Params     int     `json:"params"`
	Kept       float64 `json:"kept"`
	Accuracy   float64 `json:"accuracy"`
	Loss       float64 `json:"loss"`
	// Agreement is the fraction of test images on which the compressed
	// model predicts the dense model's class; LogitError is the relative
	// Frobenius error ‖Z − Z_dense‖_F/‖Z_dense‖_F of the test logits. Both
	// measure fidelity to the dense model, which is what the methods
	// optimise, with far less test-set noise than accuracy.
	Agreement  float64 `json:"agreement"`
	LogitError float64 `json:"logit_error"`
	// LayerErrors is each layer's relative pre-activation error on the
	// test images, ‖Ỹ − Ŷ‖_F/‖Ỹ‖_F with Ŷ computed on the compressed
	// network's own inputs (compress.Layer.HeldoutError): where along the
	// network the fidelity is lost.
	LayerErrors []float64 `json:"layer_errors,omitempty"`
	Ranks       []int     `json:"ranks"`
	// DistillEpoch is the epoch of distillation kept (0: the layer fit),
	// for a distilled run.
	DistillEpoch *int    `json:"distill_epoch,omitempty"`
	Seconds      float64 `json:"seconds"`
	Error        string  `json:"error,omitempty"`
}

// FashionModel is one trained dense model of compress-fashion.
type FashionModel struct {
	Seed         uint64  `json:"seed"`
	Accuracy     float64 `json:"accuracy"`
	Loss         float64 `json:"loss"`
	TrainSeconds float64 `json:"train_seconds"`
}

// FashionPaired is the paired comparison of the reference (sequential
// data-driven compression in compress-fashion, the sensitivity allocation in
// compress-allocation) with a baseline at one budget, pooled over the
// models: the test images only one of the two classifies correctly.
// OnlySequential counts the reference's.
type FashionPaired struct {
	Keep           float64 `json:"keep"`
	Other          string  `json:"other"`
	OnlySequential int     `json:"only_sequential"`
	OnlyOther      int     `json:"only_other"`
	McNemarP       float64 `json:"mcnemar_p"`
}

// FashionResults is the typed content of compress-fashion's results.
type FashionResults struct {
	Architecture []int           `json:"architecture"`
	Epochs       int             `json:"epochs"`
	Calibration  int             `json:"calibration_rows"`
	DenseParams  int             `json:"dense_params"`
	Models       []FashionModel  `json:"models"` // one per seed
	Keeps        []float64       `json:"keeps"`
	Runs         []FashionRun    `json:"runs"`
	Paired       []FashionPaired `json:"paired"`
	// Reference is the label the paired comparisons and verdicts are about
	// and Baselines the labels it is compared with; empty means
	// compress-fashion's ("data --sequential" against svd and asvd).
	Reference string   `json:"reference,omitempty"`
	Baselines []string `json:"baselines,omitempty"`
}

// ref returns the reference label, its name in sentences, and the
// baselines.
func (res *FashionResults) ref() (label, name string, baselines []string) {
	if res.Reference == "" {
		return fashionSequential, "sequential data-driven", fashionBaselines
	}
	return res.Reference, res.Reference, res.Baselines
}

// fashionSequential is the method the experiment's verdicts are about, and
// fashionBaselines the ones it must be at least as accurate as.
const fashionSequential = "data --sequential"

var fashionBaselines = []string{"svd", "asvd"}

type fashionMethod struct {
	label string
	name  compress.Method
	seq   bool
	alloc compress.Allocation // "" = the default (global)
	// distill, if positive, is the epochs of compress.Distill applied to a
	// copy of the compression of method from (an earlier label of the same
	// list) at the same budget: the layer fit is not run again.
	distill int
	from    string
}

// runCompressFashion trains one model per seed (--seeds, default 1) and
// compresses each with every method at every budget. With several seeds the
// table shows means over the models, so that a comparison is not decided by
// a handful of test images of one model.
func runCompressFashion(ctx context.Context, cfg Config) (*Report, error) {
	keeps := []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	methods := []fashionMethod{
		{label: "svd", name: compress.MethodSVD, seq: false},
		{label: "asvd", name: compress.MethodASVD, seq: false},
		{label: "svd-llm", name: compress.MethodSVDLLM, seq: false},
		{label: "output-pca", name: compress.MethodOutputPCA, seq: false},
		{label: "input-pca", name: compress.MethodInputPCA, seq: false},
		{label: "data", name: compress.MethodData, seq: false},
		{label: "data --sequential", name: compress.MethodData, seq: true},
	}
	if cfg.Quick {
		keeps = []float64{0.1, 0.5}
		methods = []fashionMethod{methods[0], methods[1], methods[6]}
	}
	return runFashion(ctx, cfg, "compress-fashion", keeps, methods, &FashionResults{})
}

// runCompressAllocation is compress-fashion's loop over the rank
// allocations of sequential data-driven compression, the sensitivity rule
// being the reference of the paired comparisons.
func runCompressAllocation(ctx context.Context, cfg Config) (*Report, error) {
	keeps := []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.9}
	var methods []fashionMethod
	var baselines []string
	for _, a := range compress.Allocations {
		methods = append(methods, fashionMethod{label: string(a), name: compress.MethodData, seq: true, alloc: a})
		baselines = append(baselines, string(a))
	}
	sens := string(compress.AllocSensitivity)
	ref := fashionMethod{label: sens + " + distill", name: compress.MethodData, seq: true, alloc: compress.AllocSensitivity,
		distill: fashionDistillEpochs, from: sens}
	methods = append(methods, ref)
	if cfg.Quick {
		keeps = []float64{0.1}
		methods = []fashionMethod{methods[0], methods[2], ref}
		baselines = []string{methods[0].label, methods[1].label}
	}
	return runFashion(ctx, cfg, "compress-allocation", keeps, methods, &FashionResults{Reference: ref.label, Baselines: baselines})
}

// fashionDistillEpochs is the distillation the allocation experiment's
// reference adds to the sensitivity rule's layer fit (relurec compress
// --distill 30).
const fashionDistillEpochs = 30

// runFashion trains one model per seed and compresses each with every
// method at every budget, into res.
func runFashion(ctx context.Context, cfg Config, name string, keeps []float64, methods []fashionMethod, res *FashionResults) (*Report, error) {
	if err := dataio.FashionMNISTAvailable(""); err != nil {
		return nil, err
	}
	trainSet, err := dataio.LoadFashionMNIST("", "train")
	if err != nil {
		return nil, err
	}
	test, err := dataio.LoadFashionMNIST("", "test")
	if err != nil {
		return nil, err
	}
	epochs := 15
	if cfg.Quick {
		epochs = 2
	}
	seeds := cfg.seeds(1, 1)
	arch := []int{784, 512, 256, 10}
	res.Architecture, res.Epochs, res.Calibration, res.Keeps = arch, epochs, 10000, keeps
	calib := trainSet.Head(res.Calibration).X
	total := seeds * len(keeps) * len(methods)
	done := 0
	for s := 0; s < seeds; s++ {
		seed := cfg.Seed + uint64(s)
		net, err := nn.NewMLP(arch, seed)
		if err != nil {
			return nil, err
		}
		st := time.Now()
		if _, err := train.MLP(ctx, net, trainSet.X, trainSet.Labels, train.Options{Epochs: epochs, Seed: seed,
			Progress: func(_ string, d, t int) { cfg.progress(name+": training", d, t) }}); err != nil {
			return nil, err
		}
		model := FashionModel{Seed: seed, TrainSeconds: time.Since(st).Seconds()}
		dense, err := net.Evaluate(test.X, test.Labels)
		if err != nil {
			return nil, err
		}
		model.Accuracy, model.Loss = dense.Accuracy, dense.Loss
		res.Models = append(res.Models, model)
		res.DenseParams = net.NumParams()
		denseLogits := net.Forward(test.X)
		// Which test images each compressed model gets right, for the
		// paired comparisons of this model's compressions.
		right := map[string][]bool{}
		fits := map[string]*compress.Result{} // by label and budget, for distillation
		for _, m := range methods {
			for _, keep := range keeps {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				run := FashionRun{Seed: seed, Method: m.label, Sequential: m.seq, Allocation: string(m.alloc), Keep: keep}
				t0 := time.Now()
				r, err := compressOrDistill(ctx, net, calib, m, keep, test.X, fits)
				run.Seconds = time.Since(t0).Seconds()
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					run.Error = err.Error()
				} else {
					fits[fmt.Sprint(m.label, keep)] = r
					ok, err := scoreFashionRun(&run, r, test, denseLogits)
					if err != nil {
						return nil, err
					}
					right[fmt.Sprint(m.label, keep)] = ok
				}
				res.Runs = append(res.Runs, run)
				done++
				cfg.progress(name+": compressing", done, total)
			}
		}
		res.addPaired(right, keeps)
	}
	return fashionReport(res, methods), nil
}

// scoreFashionRun fills run's scores of the compression r on the test
// set: one forward pass serves accuracy, loss, fidelity to the dense
// model's logits and the paired counts; it returns which test images r
// classifies right.
func scoreFashionRun(run *FashionRun, r *compress.Result, test *dataio.Labeled, denseLogits *mat.Dense) ([]bool, error) {
	if r.Distill != nil {
		run.DistillEpoch = &r.Distill.BestEpoch
	}
	z := r.Model.Forward(test.X)
	ok := classifiedRight(z, test.Labels)
	fid, err := metrics.CompareLogits(z, denseLogits, nil)
	if err != nil {
		return nil, err
	}
	run.Params, run.Kept = r.Params, r.Kept
	run.Accuracy = float64(countTrue(ok)) / float64(len(ok))
	run.Loss = nn.SoftmaxCrossEntropy(z, test.Labels, nil)
	run.Agreement, run.LogitError = fid.Agreement, fid.LogitError
	for _, l := range r.Layers {
		run.Ranks = append(run.Ranks, l.Rank)
		// A distilled run's layer reports are its layer
		// fit's; its per-layer errors are not measured.
		if l.HeldoutError != nil && r.Distill == nil {
			run.LayerErrors = append(run.LayerErrors, *l.HeldoutError)
		}
	}
	return ok, nil
}

// compressOrDistill is one run of method m at budget keep: CompressMLP, or
// for a distilling method a copy of the earlier compression of m.from at
// this budget (in fits) distilled for m.distill epochs (the caller times
// the call: for a distilling method, the distillation only).
func compressOrDistill(ctx context.Context, net *nn.MLP, calib *mat.Dense, m fashionMethod, keep float64, holdout *mat.Dense, fits map[string]*compress.Result) (*compress.Result, error) {
	if m.distill == 0 {
		return compress.CompressMLP(ctx, net, calib, compress.Options{Method: m.name, Sequential: m.seq, Keep: keep, Allocation: m.alloc, Holdout: holdout})
	}
	base := fits[fmt.Sprint(m.from, keep)]
	if base == nil {
		return nil, fmt.Errorf("experiment: %s needs the %s compression at keep %g, which failed or did not run first", m.label, m.from, keep)
	}
	r := *base
	r.Model = base.Model.Clone()
	if err := compress.Distill(ctx, net, &r, calib, compress.DistillOptions{Epochs: m.distill, Seed: 1}); err != nil {
		return nil, err
	}
	return &r, nil
}

// classifiedRight reports, per row of the logits z, whether the predicted
// class (the first largest logit) is the label.
func classifiedRight(z *mat.Dense, labels []int) []bool {
	out := make([]bool, len(labels))
	for i, l := range labels {
		out[i] = floats.MaxIdx(z.RawRowView(i)) == l
	}
	return out
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// addPaired adds one model's discordant counts between the reference and
// each baseline to the pooled counts.
func (res *FashionResults) addPaired(right map[string][]bool, keeps []float64) {
	label, _, baselines := res.ref()
	for _, k := range keeps {
		seq := right[fmt.Sprint(label, k)]
		for _, other := range baselines {
			o := right[fmt.Sprint(other, k)]
			if seq == nil || o == nil {
				continue
			}
			p := res.paired(k, other)
			if p == nil {
				res.Paired = append(res.Paired, FashionPaired{Keep: k, Other: other})
				p = &res.Paired[len(res.Paired)-1]
			}
			for i := range seq {
				switch {
				case seq[i] && !o[i]:
					p.OnlySequential++
				case o[i] && !seq[i]:
					p.OnlyOther++
				}
			}
			p.McNemarP = metrics.McNemarExact(p.OnlySequential, p.OnlyOther)
		}
	}
}

// fashionCell is one (method, budget) cell averaged over the models.
type fashionCell struct {
	n                                      int
	kept, acc, lo, hi, loss, agree, logits float64
	layers                                 []float64 // mean LayerErrors
}

func fashionCells(res *FashionResults) map[string]map[float64]*fashionCell {
	cells := map[string]map[float64]*fashionCell{}
	for _, r := range res.Runs {
		if r.Error != "" {
			continue
		}
		if cells[r.Method] == nil {
			cells[r.Method] = map[float64]*fashionCell{}
		}
		c := cells[r.Method][r.Keep]
		if c == nil {
			c = &fashionCell{lo: r.Accuracy, hi: r.Accuracy}
			cells[r.Method][r.Keep] = c
		}
		c.n++
		c.kept += r.Kept
		c.acc += r.Accuracy
		c.loss += r.Loss
		c.agree += r.Agreement
		c.logits += r.LogitError
		if c.layers == nil {
			c.layers = make([]float64, len(r.LayerErrors))
		}
		for i, e := range r.LayerErrors {
			if i < len(c.layers) {
				c.layers[i] += e
			}
		}
		c.lo, c.hi = math.Min(c.lo, r.Accuracy), math.Max(c.hi, r.Accuracy)
	}
	for _, byKeep := range cells {
		for _, c := range byKeep {
			f := float64(c.n)
			c.kept, c.acc, c.loss, c.agree, c.logits = c.kept/f, c.acc/f, c.loss/f, c.agree/f, c.logits/f
			for i := range c.layers {
				c.layers[i] /= f
			}
		}
	}
	return cells
}

// fashionReport turns the Fashion-MNIST runs into the report: accuracy per
// method and budget (table and plot), fidelity to the dense model
// (agreement, logit error, per-layer error), the paired comparisons and
// the verdicts.
func fashionReport(res *FashionResults, methods []fashionMethod) *Report {
	var denseAcc float64
	for _, m := range res.Models {
		denseAcc += m.Accuracy
	}
	seeds := len(res.Models)
	denseAcc /= math.Max(float64(seeds), 1)
	of := ""
	if seeds > 1 {
		of = fmt.Sprintf(", mean of %d models", seeds)
	}
	rep := &Report{
		Title:   fmt.Sprintf("Fashion-MNIST test accuracy vs fraction of parameters kept (dense %.4f, %d parameters%s)", denseAcc, res.DenseParams, of),
		Columns: []string{"method"},
		Plot:    PlotSpec{XLabel: "fraction of parameters kept (weights and biases)", YLabel: "test accuracy"},
		Results: res,
	}
	for _, k := range res.Keeps {
		rep.Columns = append(rep.Columns, fmt.Sprintf("%g", k))
	}
	cells := fashionCells(res)
	seq, refName, baselines := res.ref()
	ft := newFashionTables(rep, of)
	for _, m := range methods {
		ft.addMethod(m, res.Keeps, cells[m.label], seeds)
	}
	rep.Tables = []Table{ft.agree, ft.logits}
	if len(ft.perLayer.Rows) > 0 {
		rep.Tables = append(rep.Tables, ft.perLayer)
	}
	rep.Figures = []Figure{ft.figA, ft.figL}
	if len(res.Paired) > 0 {
		rep.Tables = append(rep.Tables, res.pairedTable(rep.Columns, refName, baselines, seeds))
	}
	rep.Series = append(rep.Series, Series{Name: "dense", X: []float64{res.Keeps[0], 1}, Y: []float64{denseAcc, denseAcc}, Dashed: true})
	rep.Notes = append(rep.Notes, res.verdicts(cells, seq, refName, baselines, denseAcc)...)
	var train float64
	for _, m := range res.Models {
		train += m.TrainSeconds
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%d model(s) trained by relurec for %d epochs each (%.0f s in all; seeds %s); %d calibration images (the first of the training set); accuracy on the 10 000 test images",
		seeds, res.Epochs, train, fashionSeeds(res.Models), res.Calibration))
	return rep
}

// fashionTables collects fashionReport's rows and series per method: the
// accuracy (the report's own table and plot), and the fidelity to the
// dense model, end to end (agreement, logit error: two further figures)
// and per layer (a table), without fine-tuning.
type fashionTables struct {
	rep                     *Report
	agree, logits, perLayer Table
	figA, figL              Figure
}

// newFashionTables starts the fidelity tables and figures with the
// report's columns; of names the averaging in their titles.
func newFashionTables(rep *Report, of string) *fashionTables {
	ft := &fashionTables{rep: rep}
	ft.agree = Table{Title: "Agreement with the dense model: fraction of test images given the dense model's class" + of, Columns: rep.Columns}
	ft.logits = Table{Title: "Relative error of the test logits, ‖Z − Z_dense‖_F / ‖Z_dense‖_F" + of, Columns: rep.Columns}
	kept := PlotSpec{XLabel: "fraction of parameters kept (weights and biases)"}
	ft.figA = Figure{File: "agreement.png", Title: "Agreement with the dense model's predictions (test images" + of + ")", Plot: kept}
	ft.figA.Plot.YLabel = "agreement"
	ft.figL = Figure{File: "logit-error.png", Title: "Relative error of the test logits" + of, Plot: kept}
	ft.figL.Plot.YLabel, ft.figL.Plot.LogY = "‖Z − Z_dense‖ / ‖Z_dense‖", true
	ft.perLayer = Table{Title: "Per-layer relative error of the pre-activations on the test images, ‖Ỹ − Ŷ‖/‖Ỹ‖ (Ŷ on the compressed network's own inputs)" + of, Columns: rep.Columns}
	return ft
}

// addMethod adds method m's rows and series from its cells per budget
// (nil where the run failed); with several models the accuracy series
// carries their range.
func (ft *fashionTables) addMethod(m fashionMethod, keeps []float64, byKeep map[float64]*fashionCell, seeds int) {
	rep := ft.rep
	row, rowA, rowL := []string{m.label}, []string{m.label}, []string{m.label}
	s := Series{Name: m.label}
	sA, sL := Series{Name: m.label}, Series{Name: m.label}
	var rowsLayer [][]string
	for _, k := range keeps {
		c := byKeep[k]
		if c == nil {
			row, rowA, rowL = append(row, "failed"), append(rowA, "failed"), append(rowL, "failed")
			continue
		}
		row = append(row, fmt.Sprintf("%.4f", c.acc))
		rowA = append(rowA, fmt.Sprintf("%.4f", c.agree))
		rowL = append(rowL, fmt.Sprintf("%.4f", c.logits))
		sA.X, sA.Y = append(sA.X, c.kept), append(sA.Y, c.agree)
		sL.X, sL.Y = append(sL.X, c.kept), append(sL.Y, c.logits)
		for i, e := range c.layers {
			for len(rowsLayer) <= i {
				rowsLayer = append(rowsLayer, []string{fmt.Sprintf("%s, layer %d", m.label, len(rowsLayer))})
			}
			// Budgets before this one that failed left no cell.
			for len(rowsLayer[i]) < len(row)-1 {
				rowsLayer[i] = append(rowsLayer[i], "–")
			}
			rowsLayer[i] = append(rowsLayer[i], fmt.Sprintf("%.4f", e))
		}
		s.X = append(s.X, c.kept)
		s.Y = append(s.Y, c.acc)
		if seeds > 1 {
			s.Lo, s.Hi = append(s.Lo, c.lo), append(s.Hi, c.hi)
		}
	}
	rep.Rows = append(rep.Rows, row)
	ft.agree.Rows = append(ft.agree.Rows, rowA)
	ft.logits.Rows = append(ft.logits.Rows, rowL)
	rep.Series = append(rep.Series, s)
	ft.figA.Series, ft.figL.Series = append(ft.figA.Series, sA), append(ft.figL.Series, sL)
	for _, r := range rowsLayer {
		for len(r) < len(rep.Columns) {
			r = append(r, "–")
		}
		ft.perLayer.Rows = append(ft.perLayer.Rows, r)
	}
}

// pairedTable is the paired comparison of the reference method with each
// baseline per budget: the test images only one of them gets right, and
// McNemar's exact p.
func (res *FashionResults) pairedTable(columns []string, refName string, baselines []string, seeds int) Table {
	pooled := ""
	if seeds > 1 {
		pooled = fmt.Sprintf(", summed over %d models", seeds)
	}
	paired := Table{Title: "Paired comparison on the test images" + pooled + ": images only " + refName + " gets right / only the baseline gets right, McNemar's exact p", Columns: columns}
	for _, other := range baselines {
		row := []string{"vs " + other}
		for _, k := range res.Keeps {
			cell := "–"
			if p := res.paired(k, other); p != nil {
				cell = fmt.Sprintf("%d / %d, p %s", p.OnlySequential, p.OnlyOther, formatP(p.McNemarP))
			}
			row = append(row, cell)
		}
		paired.Rows = append(paired.Rows, row)
	}
	return paired
}

// verdicts are the report's notes on the means over the models: the
// accuracy lost at keep 0.05, 0.1 and 0.5, and every budget where a
// baseline beats the reference method (seq, named refName).
func (res *FashionResults) verdicts(cells map[string]map[float64]*fashionCell, seq, refName string, baselines []string, denseAcc float64) []string {
	var notes []string
	for _, k := range []float64{0.05, 0.1, 0.5} {
		if c := cells[seq][k]; c != nil {
			notes = append(notes, fmt.Sprintf("keep %g: %s %+.2f points (dense %.4f → %.4f)", k, refName, 100*(c.acc-denseAcc), denseAcc, c.acc))
		}
		if c := cells["svd"][k]; c != nil {
			notes = append(notes, fmt.Sprintf("keep %g: truncated SVD %+.2f points", k, 100*(c.acc-denseAcc)))
		}
	}
	worse := 0
	for _, k := range res.Keeps {
		a := cells[seq][k]
		if a == nil {
			continue
		}
		for _, b := range baselines {
			if v := cells[b][k]; v != nil && v.acc > a.acc {
				worse++
				note := fmt.Sprintf("keep %g: %s (%.4f) beats %s (%.4f)", k, b, v.acc, refName, a.acc)
				if p := res.paired(k, b); p != nil {
					note += fmt.Sprintf(": %d test images only it gets right against %d, McNemar's exact p %s", p.OnlyOther, p.OnlySequential, formatP(p.McNemarP))
				}
				notes = append(notes, note)
			}
		}
	}
	if worse == 0 {
		if res.Reference == "" {
			notes = append(notes, "sequential data-driven is at least as accurate as truncated SVD and ASVD at every budget")
		} else {
			notes = append(notes, fmt.Sprintf("%s is at least as accurate as %s at every budget", refName, strings.Join(baselines, ", ")))
		}
	}
	return notes
}

func (res *FashionResults) paired(keep float64, other string) *FashionPaired {
	for i, p := range res.Paired {
		if p.Keep == keep && p.Other == other {
			return &res.Paired[i]
		}
	}
	return nil
}

// formatP prints a p-value as "= 0.016", or "< 1e-300" where it underflows.
func formatP(p float64) string {
	if p < 1e-300 {
		return "< 1e-300"
	}
	return fmt.Sprintf("= %.2g", p)
}

func fashionSeeds(models []FashionModel) string {
	var parts []string
	for _, m := range models {
		parts = append(parts, fmt.Sprint(m.Seed))
	}
	return strings.Join(parts, ", ")
}
