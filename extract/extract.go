package extract

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// Options controls Extract. The zero value works.
type Options struct {
	// Seed fixes the random lines, check directions and certificate
	// queries (default 0, itself a valid seed).
	Seed uint64 `json:"seed"`
	// MaxQueries caps the number of queries (rows sent to the oracle),
	// certificate included. 0: no cap. When the cap stops the search,
	// the units found so far are assembled and certified, with a warning.
	MaxQueries int `json:"max_queries"`
	// Widths are the hidden layers' widths, input side first, for a
	// network with several hidden layers (a 0 entry: not known); its
	// length is the depth. Two or more entries select the layer-by-layer
	// extraction (Hidden is then ignored); one entry is Hidden.
	Widths []int `json:"widths,omitempty"`
	// Hidden is the number of hidden units m, if known: the search stops
	// once m units are found and reproduce the oracle on the searched
	// lines. 0 searches until a line brings no new unit and the units
	// found reproduce the oracle on every line searched (or three lines
	// in a row bring no new unit).
	Hidden int `json:"hidden"`
	// CertTol is the relative residual ‖Y − f̂(X)‖_F/‖Y‖_F on fresh
	// Gaussian queries below which the extraction counts as exact.
	// Default 1e-10 (certify.DefaultTol for float64), or 100 times the
	// oracle's measured relative rounding if that is larger (float32
	// arithmetic: ≈ 5e-6), with a warning.
	CertTol float64 `json:"cert_tol"`
	// CertQueries is the number of fresh standard Gaussian queries the
	// certificate is computed on. Default 256. With several hidden
	// layers, up to as many more inputs where weights between hidden
	// units those leave unseen act are added (coverRows).
	CertQueries int `json:"cert_queries"`
	// Grid is the number of grid cells per line. Default 8 per expected
	// kink: 8·max(Hidden, 16) on the first line, then 8·(most kinks seen
	// on a line), at most 8·4096 (8·4·Hidden for the last layer of a
	// deeper network, searched in its frame with its width given).
	Grid int `json:"grid"`
	// Reach is the half-width of the searched stretch of each line, in
	// units of √d (the scale of the kinks' positions). Default 40, which
	// holds a unit's kink with probability ≈ 0.98 when its bias is small.
	Reach float64 `json:"reach"`
	// PolishTol is the expected parameter error (from the oracle's
	// rounding and the steps the Jacobians were measured with) above which
	// a unit is re-measured, once all units are found, at a point far from
	// every other hyperplane (2·(d + 2) queries per unit). Default 1e-10;
	// negative: never.
	PolishTol float64 `json:"polish_tol"`
	// MaxLines caps the number of lines searched. Default 64, or 160
	// for an oracle that rounds coarser than float64 (float32), whose
	// units show up as isolated kinks less often.
	MaxLines int `json:"max_lines"`
	// Batch caps the rows of one oracle call. Default 16384.
	Batch int `json:"batch"`
	// Exact makes Extract return an error wrapping errs.ErrNotExact (with
	// the Result) when the certificate is not met. By default such a
	// Result is returned with Certificate.Met = false and a nil error.
	Exact bool `json:"exact"`
	// Progress, if set, is called after each line ("lines", units found,
	// Hidden or 0), before each Gauss–Newton step of the least-squares
	// polish ("least-squares polish", step, steps at most) and before the
	// certificate ("certify", 0, CertQueries).
	Progress func(stage string, done, total int) `json:"-"`
	// Checkpoint, if set, logs the oracle's answers and answers the
	// batches it has logged without calling the oracle (see
	// OpenCheckpoint): an interrupted extraction rerun with it resumes
	// where it stopped. Replayed answers count as queries.
	Checkpoint *Checkpoint `json:"-"`
}

// Result is an extracted network and the evidence behind it.
type Result struct {
	// Model is the extracted network in the normalisation of
	// nn.Depth2.Normalize: ‖w_i‖ = 1, units sorted by ‖A_{:,i}‖ (one
	// hidden layer; nil for deeper networks).
	Model *nn.Depth2 `json:"-"`
	// Network is the extracted network as Linear–ReLU–…–Linear layers
	// (every hidden unit's weight row of unit norm), for any depth.
	Network *nn.MLP `json:"-"`
	// Layers reports each hidden layer of a network with several
	// (Options.Widths); Units is then the total over the layers.
	Layers []LayerResult `json:"layers,omitempty"`
	// Queries is the number of rows sent to the oracle (the query count
	// the literature compares), Calls the number of oracle calls.
	Queries int `json:"queries"`
	Calls   int `json:"calls"`
	// Outputs is the number of outputs the oracle answers with (0 if it
	// was never asked).
	Outputs int `json:"outputs"`
	// Certificate is the relative residual of Model on CertQueries fresh
	// standard Gaussian queries that played no part in the extraction
	// (several hidden layers: or on the cover rows beside them, whichever
	// is larger; Samples counts both).
	Certificate certify.Certificate `json:"certificate"`
	// Units is the number of hidden units found, Lines the number of
	// lines searched, Kinks the kinks located on them.
	Units int `json:"units"`
	Lines int `json:"lines"`
	Kinks int `json:"kinks"`
	// Diagnostics break the work down.
	Diagnostics Diagnostics   `json:"diagnostics"`
	Warnings    []string      `json:"warnings,omitempty"`
	Elapsed     time.Duration `json:"elapsed_ns"`
}

// Diagnostics are the internals of an extraction.
type Diagnostics struct {
	// QueriesSearch, QueriesJacobian and QueriesCert split Queries into
	// the line searches, the Jacobian measurements and the certificate.
	QueriesSearch   int `json:"queries_search"`
	QueriesJacobian int `json:"queries_jacobian"`
	QueriesCert     int `json:"queries_cert"`
	// QueriesRefine counts the fresh queries of the whole-network
	// least-squares polish (an oracle rounding coarser than float64
	// only), RefineBefore and RefineAfter the relative residual on them
	// before and after it, RefineSteps its Gauss–Newton steps (with
	// those of a one-hidden-layer search's trial fits).
	QueriesRefine int     `json:"queries_refine"`
	RefineBefore  float64 `json:"refine_before,omitempty"`
	RefineAfter   float64 `json:"refine_after,omitempty"`
	RefineSteps   int     `json:"refine_steps,omitempty"`
	// Grown counts the units fitted to the residual of the units found
	// before the polish (a coarse oracle whose search did not end on a
	// fit; see grow.go).
	Grown int `json:"grown,omitempty"`
	// Unbent counts the records dropped before growing because the
	// oracle's slope does not change at their hyperplane as they predict
	// (bent.go; its queries are part of QueriesRefine).
	Unbent int `json:"unbent,omitempty"`
	// Jacobians counts Jacobian measurements (d + 2 queries each),
	// JacobianRetries those repeated with a smaller step after failing
	// their check.
	Jacobians       int `json:"jacobians"`
	JacobianRetries int `json:"jacobian_retries"`
	// KnownKinks counts kinks recognised as crossings of units already
	// found (no Jacobian needed), Duplicates units found twice,
	// Rejected kinks whose Jacobian jump was not a single unit.
	KnownKinks int `json:"known_kinks"`
	Duplicates int `json:"duplicates"`
	Rejected   int `json:"rejected"`
	// Polished counts units re-measured at a point far from the other
	// hyperplanes (their first measurement's expected error exceeded
	// PolishTol); PolishRejected those whose re-measurement disagreed.
	Polished       int `json:"polished"`
	PolishRejected int `json:"polish_rejected"`
	// QueriesPlane counts the hyperplane tests' queries and
	// QueriesOrient the column tests' (networks with several hidden
	// layers).
	QueriesPlane  int `json:"queries_plane,omitempty"`
	QueriesOrient int `json:"queries_orient,omitempty"`
	// Unresolved counts clusters of kinks too close to separate.
	Unresolved int `json:"unresolved"`
	// Noise is the largest median relative bend of a straight grid
	// triple over the lines: the oracle's relative rounding (≈ 1e-16 for
	// float64 arithmetic, ≈ 1e-8 for float32).
	Noise float64 `json:"noise"`
	// BatchRounding reports an oracle whose answer for a point depends
	// on the batch it comes in (PyTorch's matrix products round so),
	// measured in the input space: behind float32 (any depth) copies of
	// one point in one batch came back different (OpenBLAS's AVX2 sgemm
	// rounds a row by its position in the batch); behind float64, in the
	// first layer of a network with several hidden layers, a point of
	// the noise measurement queried again alone came back different.
	BatchRounding bool `json:"batch_rounding,omitempty"`
	// MaxRank2 is the largest σ₂/σ₁ of an accepted Jacobian jump (0 for
	// one output): how far the jumps were from rank one.
	MaxRank2 float64 `json:"max_rank2"`
	// SignResidual is the relative residual of the affine term left by
	// the sign resolution: ‖L − Σ β_i â_i ŵ_iᵀ‖/‖Σ |β_i|·‖â_i‖‖ (0 when
	// every unit's orientation is resolved exactly).
	SignResidual float64 `json:"sign_residual"`
	// LineResidual is the relative residual of the assembled model on the
	// searched lines' samples near the origin (|t| ≤ 2√d), the search's
	// stopping test.
	LineResidual float64 `json:"line_residual"`
	// Replayed counts the queries answered from Options.Checkpoint
	// instead of the oracle (part of Queries).
	Replayed int `json:"replayed,omitempty"`
}

// unit is a hidden unit as found: unit normal w (oriented so that w·v > 0
// on the line it was found on), offset b = −w·x*, output column a =
// A_{:,i}·‖w_i‖ (true scale), and winf = ‖w‖_∞.
type unit struct {
	w    []float64
	b    float64
	a    []float64
	winf float64
	// est is the expected error of w and b from the rounding of the
	// Jacobians it was read from; polish re-measures units whose est is
	// large.
	est, estW float64
	// polished marks a unit re-measured by polish; tries counts the
	// attempts whose measurement failed (polish gives up after
	// polishTries).
	polished bool
	tries    int
	// score counts the points where the hyperplane test saw the unit's
	// kink (deep mode).
	score int
}

type extractor struct {
	d int
	// dom restricts the queries to a domain (nil: all of R^d); deep
	// makes the units the first hidden layer of a deeper network (see
	// deep.go).
	dom     *domain
	deep    bool
	pending []cand
	opt     Options
	o       *counted
	rng     *rand.Rand
	units   []unit
	// jsum is the sum of the Jacobians measured (that passed their
	// check), jx where they were measured: the orientations need no
	// more.
	jsum     *mat.Dense
	jx       [][]float64
	lines    []*lineResult
	diag     Diagnostics
	warn     []string
	etaFloor float64
	eta      float64
	noiseMed float64
	// deeper counts candidates of deep mode whose critical set was not a
	// hyperplane.
	deeper int
	// refX, refY are the least-squares polish's fresh queries and answers
	// (refineData), drawn from refRng; refined is the polished network of
	// a trial fit that ended the search (coarse oracles); fitAt is the
	// count of units found (newUnit) at the last trial fit.
	refX, refY   *mat.Dense
	refRng       *rand.Rand
	refined      *nn.Depth2
	found, fitAt int
	// outOfBudget: the search stopped at the query budget (stopMsg).
	outOfBudget bool
	// batched: a later stage of a deeper network behind an oracle that
	// rounds a batch's rows by their position (the first layer's
	// Diagnostics.BatchRounding; see kinkFactor).
	batched bool
}

// Extract recovers a one-hidden-layer ReLU network f(x) = A·ReLU(W·x + b) +
// c with d inputs from queries to oracle alone, by locating the kinks of f
// along random lines and measuring the jump of its Jacobian across each
// (the critical-point approach of the cryptanalytic extraction
// literature; see the package comment for the algorithm and its
// assumptions). Bad arguments and an oracle that answers with the wrong
// shape or non-finite values give errors wrapping errs.ErrInput.
func Extract(ctx context.Context, oracle Oracle, d int, opt Options) (*Result, error) {
	start := time.Now()
	if oracle == nil {
		return nil, errs.Inputf("extract.Extract: the oracle is nil")
	}
	if d < 1 {
		return nil, errs.Inputf("extract.Extract: d = %d inputs; need d ≥ 1", d)
	}
	if opt.Checkpoint != nil {
		return opt.Checkpoint.extract(ctx, oracle, d, opt)
	}
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if opt.MaxQueries > 0 {
		// A deeper network's certificate holds a second set of up to
		// CertQueries (coverRows').
		need := opt.CertQueries + 4*(d+2)
		if len(opt.Widths) > 1 {
			need += opt.CertQueries
		}
		if opt.MaxQueries < need {
			return nil, errs.Options(errs.ErrInput, "extract.Extract: ", errs.Option{Struct: "Options", Field: "MaxQueries", Value: fmt.Sprint(opt.MaxQueries)}, fmt.Sprintf(" cannot pay for even two Jacobians (2·(d+2)), a line and the certificate: need at least %d", need))
		}
	}
	if len(opt.Widths) == 1 {
		opt.Hidden = opt.Widths[0]
	}
	if len(opt.Widths) > 1 {
		return extractDeep(ctx, oracle, d, opt)
	}
	e := newExtractor(d, opt, &counted{f: oracle, d: d})
	if opt.MaxQueries > 0 {
		e.o.limit = opt.MaxQueries - opt.CertQueries
	}
	stop, err := e.search(ctx)
	if err != nil {
		return nil, err
	}
	if stop != "" {
		e.warn = append(e.warn, stop)
	}
	searchWarn := len(e.warn)
	net, err := e.assemble(true)
	if err != nil {
		return nil, err
	}
	if e.refined != nil {
		net = e.refined
	}
	if net != nil && e.coarse() {
		found := net.Hidden()
		if net, err = e.refineIfRoom(ctx, net, stop != ""); err != nil {
			return nil, err
		}
		if e.diag.Grown > 0 {
			// What assemble said of the units found (missing ones)
			// describes the network before the units grown.
			e.warn = append(e.warn[:searchWarn], fmt.Sprintf("%d units grown on the residual of the %d the search found, then polished with them", e.diag.Grown, found))
		}
	}
	res := &Result{Lines: len(e.lines), Units: len(e.units)}
	if net != nil {
		res.Units = net.Hidden() // refine may drop a copy of a unit
	}

	for _, lr := range e.lines {
		res.Kinks += len(lr.kinks)
	}
	tol, err := e.certifyNet(ctx, net, res)
	if err != nil {
		return nil, err
	}
	res.Queries, res.Calls, res.Outputs = e.o.queries, e.o.calls, e.o.p
	e.diag.Noise = e.noiseMed
	e.diag.QueriesSearch = res.Queries - e.diag.QueriesJacobian - e.diag.QueriesCert - e.diag.QueriesRefine
	res.Diagnostics = e.diag
	if opt.Hidden > 0 && res.Units != opt.Hidden {
		e.warn = append(e.warn, fmt.Sprintf("found %d units, Hidden = %d (units never active along the lines — dead for every input queried — are invisible to queries)", res.Units, opt.Hidden))
	}
	res.Warnings = e.warn
	res.Elapsed = time.Since(start)
	if !res.Certificate.Met {
		res.Warnings = append(res.Warnings, fmt.Sprintf("certificate not met: relative residual %.2e > %.0e on %d fresh queries", res.Certificate.Residual, tol, opt.CertQueries))
		if opt.Exact {
			return res, fmt.Errorf("%w: extracted network's relative residual %.2e > %.0e on %d fresh queries (%d units found)", errs.ErrNotExact, res.Certificate.Residual, tol, opt.CertQueries, res.Units)
		}
	}
	return res, nil
}

// trialFit decides, for a coarse oracle, whether the units found are all
// there is when their line residual is above the search's tolerance: the
// residual a unit found to a few digits leaves on the lines can exceed any
// tolerance a missing unit would, so the search would otherwise run all its
// lines. trialSteps Gauss–Newton steps of the least-squares polish are
// run on the units found (once per set of units); when they bring the
// residual on its fresh queries to the certificate's tolerance, the
// search ends, and the polish goes on from that network (refined).
func (e *extractor) trialFit(ctx context.Context) (bool, error) {
	if !e.coarse() || e.found == e.fitAt || e.diag.LineResidual > trialGate {
		return false, nil
	}
	e.fitAt = e.found
	net, err := e.assemble(false)
	if err != nil || net == nil {
		return false, err
	}
	refined, before, after, err := e.refine(ctx, net, trialSteps)
	if err != nil {
		return false, err
	}
	if after > e.stopTol() {
		return false, nil
	}
	e.refined = refined
	e.diag.RefineBefore = before
	return true, nil
}

// trialGate is the line residual above which no trial fit is tried: units
// found to a few digits leave 1e-3 or less (a trained 784-32-10 served in
// float32), a missing unit of weight far more.
const trialGate = 1e-2

// trialSteps is how many Gauss–Newton steps a trial fit takes: the first
// leaves the activation patterns the units' errors move, the second the
// float32 floor when no unit is missing.
const trialSteps = 2

// refineIfRoom polishes net by least squares (refine) on a coarse oracle;
// when the query budget leaves no room for it, net is kept, with a warning.
// With grow (a search that stopped before its units reproduced the lines:
// units may be missing) the polish starts with units grown on net's
// residual (refineGrown), and the plain polish is tried too when that one
// leaves the certificate's tolerance unmet; the better of the two is kept.
func (e *extractor) refineIfRoom(ctx context.Context, net *nn.Depth2, grow bool) (*nn.Depth2, error) {
	var refined *nn.Depth2
	var before, after float64
	if grow {
		g, b, a, err := e.refineGrown(ctx, net)
		switch {
		case errors.Is(err, errBudget):
		case err != nil:
			return nil, err
		default:
			refined, before, after = g, b, a
		}
	}
	if refined == nil || after > e.stopTol() {
		plain, b, a, err := e.refine(ctx, net, refineSteps)
		switch {
		case errors.Is(err, errBudget):
			if refined == nil {
				e.warn = append(e.warn, fmt.Sprintf("the query budget (MaxQueries = %d) left no room for the least-squares polish", e.opt.MaxQueries))
				return net, nil
			}
		case err != nil:
			return nil, err
		case refined == nil || a < after:
			refined, before, after = plain, b, a
			e.diag.Grown, e.diag.Unbent = 0, 0
		}
	}
	if e.refined == nil {
		// Otherwise the trial fit's starting residual stands.
		e.diag.RefineBefore = before
	}
	e.diag.RefineAfter = after
	return refined, nil
}

// certifyNet sets res's certificate: net's relative residual on
// Options.CertQueries fresh Gaussian queries, outside the search's budget,
// against Options.CertTol or the tolerance the oracle's rounding allows
// (stopTol). It returns that tolerance.
func (e *extractor) certifyNet(ctx context.Context, net *nn.Depth2, res *Result) (float64, error) {
	opt, d := e.opt, e.d
	// The certificate: fresh Gaussian queries, not part of the budget of
	// the search.
	if opt.Progress != nil {
		opt.Progress("certify", 0, opt.CertQueries)
	}
	e.o.limit = 0
	X := mat.NewDense(opt.CertQueries, d, nil)
	for i := range X.RawMatrix().Data {
		X.RawMatrix().Data[i] = e.rng.NormFloat64()
	}
	Y, err := e.o.query(ctx, X)
	if err != nil {
		return 0, err
	}
	e.diag.QueriesCert = opt.CertQueries
	tol := opt.CertTol
	if tol == 0 {
		tol = e.stopTol()
		if e.noiseMed > 1e-12 {
			e.warn = append(e.warn, fmt.Sprintf("the oracle's rounding (%.1e relative) looks like float32 arithmetic: certificate tolerance %.1e", e.noiseMed, tol))
		}
	}
	if net != nil {
		res.Certificate = certify.New(certify.RelResidual(Y, net.Forward(X)), tol, opt.CertQueries)
		res.Model = net.Normalize()
		res.Network = res.Model.MLP()
	} else {
		res.Certificate = certify.New(math.Inf(1), tol, opt.CertQueries)
	}
	return tol, nil
}

func (o *Options) defaults() error {
	bad := func(name string, v float64) error {
		return errs.Options(errs.ErrInput, "extract.Extract: ", errs.Option{Struct: "Options", Field: name, Value: fmt.Sprint(v)}, "; it must be ≥ 0 and finite (0 means the default)")
	}
	for i, w := range o.Widths {
		if w < 0 {
			return errs.Options(errs.ErrInput, "extract.Extract: ", errs.Option{Struct: "Options", Field: "Widths"}, fmt.Sprintf(" has %d at position %d; widths must be ≥ 0 (0: not known)", w, i))
		}
	}
	for name, v := range map[string]float64{"MaxQueries": float64(o.MaxQueries), "PolishTol": math.Abs(o.PolishTol), "Hidden": float64(o.Hidden), "CertTol": o.CertTol, "CertQueries": float64(o.CertQueries), "Grid": float64(o.Grid), "Reach": o.Reach, "MaxLines": float64(o.MaxLines), "Batch": float64(o.Batch)} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad(name, v)
		}
	}
	if o.CertQueries == 0 {
		o.CertQueries = 256
	}
	if o.PolishTol == 0 {
		o.PolishTol = 1e-10
	}
	if o.Reach == 0 {
		o.Reach = 40
	}
	if o.Batch == 0 {
		o.Batch = 16384
	}
	return nil
}

// maxGridKinks caps the kinks per line a line's grid is sized for (8
// points per kink). The grid follows the kinks and unresolved clusters of
// the lines before, and a line whose clusters do not resolve would
// otherwise size the next line's grid to them, each line up to lineCap
// grids, without bound.
const maxGridKinks = 4096

// search runs lines until the stopping rule holds (it goes on from the
// lines already searched: see lastStage); it returns a warning
// when it stopped for another reason.
func (e *extractor) search(ctx context.Context) (string, error) {
	maxKinks := max(e.opt.Hidden, 16)
	kinkCap := maxGridKinks
	if e.dom != nil && !e.deep && e.opt.Hidden > 0 {
		// The last layer of a deeper network, in its frame, width given:
		// a line crosses each of its units' hyperplanes once, and more
		// kinks are clusters its rounding leaves unresolved (behind
		// PyTorch's float32 server, trained 784-32-16-10 seed 0: without
		// this cap its lines' samples passed 6 GB).
		kinkCap = 4 * maxKinks
	}
	quiet, dq, idle := 0, 0, 0
	for len(e.lines) < e.maxLines() {
		grid := e.opt.Grid
		if grid == 0 {
			grid = 8 * maxKinks
		}
		l := e.newLine()
		before, rejected := len(e.units), e.diag.Rejected
		lr, err := e.searchLine(ctx, l, grid)
		if err == nil {
			e.lines = append(e.lines, lr)
			err = e.learnLine(ctx, lr)
		}
		if err != nil {
			return e.stopMsg(err)
		}
		maxKinks = min(max(maxKinks, len(lr.kinks)+lr.unresolved), kinkCap)
		e.diag.Unresolved += lr.unresolved
		if e.opt.Progress != nil {
			e.opt.Progress("lines", len(e.units), e.opt.Hidden)
		}
		if e.deep {
			// The first layer of a deeper network: no model to check the
			// lines against; the search ends with the units given, or
			// after lines that bring none.
			if len(e.units) > before || e.onEdges() {
				dq = 0
			} else {
				dq++
			}
			if e.opt.Hidden > 0 && len(e.units) >= e.opt.Hidden || dq >= e.idleLines() {
				if err := e.keepBest(ctx); err != nil {
					return e.stopMsg(err)
				}
				if e.opt.Hidden > 0 && len(e.units) < e.opt.Hidden && dq < e.idleLines()-1 {
					// keepBest dropped units of later layers counted
					// towards the width: search on.
					continue
				}
				// The hyperplane test lets a record's error past and
				// measures it (planeTest): the units it measured above
				// PolishTol are re-measured, each at most polishTries
				// times, at new points.
				for try := 0; e.opt.PolishTol > 0 && try < polishTries; try++ {
					if err := e.polish(ctx, e.opt.PolishTol); err != nil {
						return e.stopMsg(err)
					}
				}
				if e.opt.Hidden > 0 && len(e.units) < e.opt.Hidden {
					return fmt.Sprintf("%d lines in a row found no new unit: %d of %d units found", dq, len(e.units), e.opt.Hidden), nil
				}
				return "", nil
			}
			continue
		}
		if len(e.units) > before {
			idle = 0
		} else {
			idle++
		}
		// A clean line: every kink on it was a unit already found.
		clean := len(e.units) == before && e.diag.Rejected == rejected
		if clean && !e.onEdges() {
			quiet++
		} else {
			quiet = 0
		}
		if len(e.units) == 0 {
			continue
		}
		// A line with no new unit (its other kinks rejected as merged,
		// which a coarsely rounding oracle leaves on most lines) is worth
		// checking whether the units found already reproduce the oracle.
		done := len(e.units) == before && !e.onEdges()
		if e.opt.Hidden > 0 {
			done = len(e.units) >= e.opt.Hidden || quiet >= 3
		}
		// Three clean lines in a row end the search, except with a coarse
		// oracle: units it has not found yet can hide for many lines
		// (a trained 784-32-10 served in float32: 5 of 32 after three
		// clean lines, all 32 by 160).
		stalled := quiet >= 3 && !e.coarse()
		if !done && !stalled {
			continue
		}
		if e.opt.PolishTol > 0 {
			if err := e.polish(ctx, e.opt.PolishTol); err != nil {
				return e.stopMsg(err)
			}
		}
		if _, err := e.assemble(false); err != nil {
			return "", err
		}
		if e.diag.LineResidual <= e.searchTol() {
			return "", nil
		}
		// A trial fit once the width given is reached, or after two lines
		// in a row with no new unit.
		if e.opt.Hidden > 0 && len(e.units) >= e.opt.Hidden || idle >= 2 {
			if fitted, err := e.trialFit(ctx); err != nil || fitted {
				return e.stopMsg(err)
			}
		}
		if stalled {
			return fmt.Sprintf("three lines in a row found no new unit, and the %d units found leave a relative residual of %.2e on the lines", len(e.units), e.diag.LineResidual), nil
		}
	}
	return fmt.Sprintf("stopped after MaxLines = %d lines", e.maxLines()), nil
}

// idleLines is the number of lines in a row without a new unit that ends
// the first layer's search of a deeper network: 2, or 3 with the width
// given (the search then knows units are missing). A coarse oracle hides
// units for many lines — most of its Jacobian jumps hold several units
// and are rejected, and units that kept their initial norm bend lines
// near its rounding — so it gets 8 more, and 80 more with the width
// given, which says units are missing (a trained 784-32-16-10 behind the
// Go float32 oracle: 28 of 32 units when 11 lines in a row bring none;
// one served by PyTorch in float32 through OpenBLAS's AVX-512 kernel,
// seed 2 of bench/extract_fashion.py: 30 of 32 after 33 lines in a row
// without one, all 32 by line 75). Only a search short of the width
// runs them.
func (e *extractor) idleLines() int {
	n := 2
	if e.opt.Hidden > 0 {
		n = 3
	}
	switch {
	case e.coarse() && e.opt.Hidden > 0:
		n += 80
	case e.coarse():
		n += 8
	}
	return n
}

// newLine returns a random line: through a standard Gaussian point in a
// random direction, or, on a domain, through two random points of it,
// searched on the segment the domain leaves. On an orthant the first
// lines run along its edges (axisLine).
func (e *extractor) newLine() *line {
	l := &line{x0: make([]float64, e.d), v: make([]float64, e.d)}
	if e.dom != nil && e.dom.halfNormal && len(e.lines) < e.d {
		if l := e.dom.axisLine(len(e.lines), e.opt.Reach); l != nil {
			return l
		}
	}
	if e.dom != nil {
		p, q := e.dom.sample(e.rng), e.dom.sample(e.rng)
		copy(l.x0, p)
		for j := range l.v {
			l.v[j] = q[j] - p[j]
		}
	} else {
		for j := range l.x0 {
			l.x0[j] = e.rng.NormFloat64()
			l.v[j] = e.rng.NormFloat64()
		}
	}
	nv := math.Sqrt(dotf(l.v, l.v))
	for j := range l.v {
		l.v[j] /= nv
	}
	if e.dom != nil {
		// An unbounded side of the domain is searched as far as a whole
		// line would be.
		reach := e.opt.Reach * math.Sqrt(float64(e.d))
		l.lo, l.hi = e.dom.segment(l.x0, l.v)
		l.lo, l.hi = math.Max(l.lo, -reach), math.Min(l.hi, reach)
	}
	return l
}

// onEdges reports a search on an orthant that has not yet run along
// every edge (axisLine): lines without a new unit say little until then.
func (e *extractor) onEdges() bool {
	return e.dom != nil && e.dom.halfNormal && len(e.lines) < e.d
}

// maxLines is Options.MaxLines or its default (64, 160 for a coarse
// oracle, 64 more than the edges of an orthant).
func (e *extractor) maxLines() int {
	switch {
	case e.opt.MaxLines > 0:
		return e.opt.MaxLines
	case e.coarse():
		return 160
	case e.dom != nil && e.dom.halfNormal:
		return 64 + e.d // the orthant's edges first
	}
	return 64
}

// stopMsg turns a budget stop into a warning and passes other errors on.
func (e *extractor) stopMsg(err error) (string, error) {
	if errors.Is(err, errBudget) {
		e.outOfBudget = true
		return fmt.Sprintf("the query budget (MaxQueries = %d) ran out after %d lines", e.opt.MaxQueries, len(e.lines)), nil
	}
	return "", err
}

// coarse reports an oracle that rounds coarser than float64 arithmetic
// (float32): its units come from the search to a few digits, and the
// whole-network least-squares polish (refine) restores the rest.
func (e *extractor) coarse() bool { return coarseRounding(e.noiseMed) }

// coarseRounding reports a measured relative rounding nu coarser than
// float64 arithmetic leaves (float32's is ≈ 1e-7).
func coarseRounding(nu float64) bool { return nu > 1e-12 }

// searchTol is the line residual that ends the search: the certificate's
// tolerance, or 10 times it for a coarse oracle, whose units the
// least-squares polish then refines (each of them found, to a few digits,
// leaves a residual well below that; a missing one, well above).
func (e *extractor) searchTol() float64 {
	if e.coarse() {
		return 10 * e.stopTol()
	}
	return e.stopTol()
}

// stopTol is the certificate's tolerance.
func (e *extractor) stopTol() float64 {
	if e.opt.CertTol > 0 {
		return e.opt.CertTol
	}
	// An oracle that rounds coarser than float64 (float32 arithmetic)
	// cannot be reproduced closer than its own rounding.
	return math.Max(certify.DefaultTol(certify.Float64Roundoff), 100*e.noiseMed)
}
