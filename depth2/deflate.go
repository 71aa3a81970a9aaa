package depth2

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/nn"
)

// maxDeflations bounds the rounds of deflate; deflateExtra is how many
// units beyond the known width a round may add, when the width is reached,
// before pruning back.
const (
	maxDeflations = 4
	deflateExtra  = 2
	// misfitShare is the largest share of the residual's norm a round may
	// leave, misfitProbe the refinement steps after which a round is first
	// judged, and misfitPerUnit the least share of the residual's energy
	// each unit a round adds must take by then (deflate).
	misfitShare   = 0.5
	misfitProbe   = 5
	misfitPerUnit = 0.1
)

// deflate looks for units the first decomposition missed or got wrong, in
// the residual Y − f(X) of the refined network (an extension, not in the
// paper): the moments of order ≥ 2 of the residual are a sum over the units
// the network lacks (the affine term does not reach them), and their
// sampling noise scales with the residual, not with Y, so units too weak to
// clear the thresholds at first (large |b_i|, or ℓ = 2, where orders 5 and 6
// are noisy) stand out. They are few, so the full-rank machinery (ℓ = 1,
// dimension reduced through T̂_2) finds them; they are added and everything
// is refined again. When the width is known and already reached, the
// residual's units are added anyway and the network is pruned back to the
// width by backward elimination (the unit whose removal costs least in a
// least-squares refit goes first): a badly started unit that the refinement
// could not move into place is replaced. A round is kept only if it lowers
// the loss by at least 1e-3 relative; the rounds stop when the residual is
// zero or shows no unit above its noise.
//
// Data that are not one hidden layer end the rounds early, with
// Diagnostics.Misfit set (and Fit skips the polishes on all samples, which
// cannot certify them). A one-hidden-layer network's rounds may each
// remove little until the last missing units are found, and then the rest
// (trained-like 10-8-3 networks, n = 3e4: 0.37 → 0.31 → 0.22 → 0.049 →
// 2e-16), but each unit a round adds is one of the network's and takes its
// share of the residual: in 57 rounds of 28 such networks, the 18 rounds
// that left more than half of the residual after misfitProbe steps had
// taken at least 15% of its energy per added unit. Components of a deeper
// network's residual take less (20-10-10-4 data: 4–9% per unit, n = 2e4
// and 1e5; 10-8-8-3: 2% in the second round), and each round costs more
// than the last as the units pile up (0.27 → 0.20 → 0.16 → 0.14 → 0.13
// with 17 units, minutes at n = 1e5). So a round whose probe leaves more
// than misfitShare of the residual with less than misfitPerUnit of its
// energy per added unit ends the rounds, and so does a residual that still
// shows units after maxDeflations rounds, the last of which left more than
// misfitShare of it.
func (pr *problem) deflate(ctx context.Context, net *nn.Depth2, res *Result) (*nn.Depth2, error) {
	X, Y, n, d := pr.X, pr.Y, pr.n, pr.d
	left := 0.0 // share of the residual's norm the last kept round left
	for round := 1; ; round++ {
		loss := pr.loss(net)
		if loss <= zeroLoss(pr.roundoff)*pr.yy {
			break
		}
		rec, err := pr.residualUnits(ctx, net, round)
		if errors.Is(err, ErrNoUnits) {
			break
		}
		if err != nil {
			return nil, err
		}
		if round > maxDeflations {
			if left > misfitShare {
				res.Diagnostics.Misfit = fmt.Sprintf("after %d rounds of deflation the residual (%.2g of ‖Y‖) still shows %s, and the last round left %.0f%% of it", maxDeflations, math.Sqrt(2*loss/pr.yy), unitsPhrase(len(rec.Units)), 100*left)
			}
			break
		}
		// The new units' output weights come from the residual's moments,
		// whose scalar inversion amplifies noise by e^{b²/2}; a least-squares
		// refit of the output layer on the refinement's subsample gives the
		// refinement a sane start.
		cand := dropDead(addUnits(net, rec.Units))
		rows := min(n, refineRows(newLayout(cand).size))
		if cand, err = FitImproper(ctx, X.Slice(0, rows, 0, d).(*mat.Dense), Y.Slice(0, rows, 0, pr.p).(*mat.Dense), cand.W, cand.B); err != nil {
			return nil, err
		}
		stage := pr.stage(fmt.Sprintf("refine (deflation %d)", round))
		probe := min(misfitProbe, pr.opt.MaxIter)
		ref, err := Refine(ctx, X, Y, cand, RefineOptions{MaxIter: probe, Affine: true, SubsampleOnly: true, Progress: stage})
		if err != nil {
			return nil, err
		}
		cand = ref.Net
		share := pr.loss(cand) / loss // of the residual's energy, left
		if math.Sqrt(share) > misfitShare && (1-share)/float64(len(rec.Units)) < misfitPerUnit {
			res.Diagnostics.Misfit = fmt.Sprintf("%s the residual's moments showed took %.0f%% of its energy in %d refinement steps (%.1f%% per unit, where a missing unit takes its share; the residual is %.2g of ‖Y‖)", unitsPhrase(len(rec.Units)), 100*(1-share), ref.Iterations, 100*(1-share)/float64(len(rec.Units)), math.Sqrt(2*loss/pr.yy))
			break
		}
		cand, pruned, err := pr.finishRound(ctx, ref, probe, stage)
		if err != nil {
			return nil, err
		}
		after := pr.loss(cand)
		if after > (1-1e-3)*loss {
			break
		}
		left = math.Sqrt(after / loss)
		res.Diagnostics.Deflations++
		res.Diagnostics.AddedUnits += len(rec.Units)
		res.Diagnostics.ReplacedUnits += pruned
		net = cand
	}
	return net, nil
}

// residualUnits looks for the units the residual Y − net(X) shows: its
// moments (EstimateMoments) in as many dimensions as units are missing
// (up to deflateExtra replacements at the width), and the units they give
// (RecoverRobust, ℓ = 1, with the round's seed). The error wraps
// ErrNoUnits when there are none.
func (pr *problem) residualUnits(ctx context.Context, net *nn.Depth2, round int) (*Recovery, error) {
	X, Y, d := pr.X, pr.Y, pr.d
	want := pr.opt.Hidden - liveUnits(net)
	R := net.Forward(X)
	R.Sub(Y, R)
	// Missing units are looked for in want dimensions; at the width, up
	// to deflateExtra replacements.
	look := want
	if want <= 0 {
		look = deflateExtra
	}
	dim := -1
	if pr.opt.Hidden > 0 {
		dim = min(look, d)
	}
	mo, err := EstimateMoments(ctx, X, R, MomentOptions{MaxOrder: 4, Dim: dim, Progress: pr.opt.Progress})
	if err != nil {
		return nil, err
	}
	// Beyond the width, the pruning removes whichever of old and new
	// units fit worst.
	th := pr.opt.Thresholds
	th.MaxUnits = 0
	if pr.opt.Hidden > 0 {
		th.MaxUnits = min(look, d)
	}
	return RecoverRobust(mo, RecoverOptions{Ell: 1, Thresholds: th, Seed: pr.opt.Seed + uint64(round)})
}

// finishRound completes a deflation round's refinement from the probe's
// result ref: the rest of Options.MaxIter steps when the probe did not
// converge, then, above the width, the pruning of the units that fit
// worst and a refinement of what is left. It returns the network and the
// number of units pruned.
func (pr *problem) finishRound(ctx context.Context, ref *RefineResult, probe int, stage func(done, total int)) (*nn.Depth2, int, error) {
	X, Y := pr.X, pr.Y
	cand := ref.Net
	var err error
	if !ref.Converged && pr.opt.MaxIter > probe {
		if ref, err = Refine(ctx, X, Y, cand, RefineOptions{MaxIter: pr.opt.MaxIter - probe, Affine: true, SubsampleOnly: true, Progress: stage}); err != nil {
			return nil, 0, err
		}
		cand = ref.Net
	}
	pruned := 0
	if pr.opt.Hidden > 0 && cand.Hidden() > pr.opt.Hidden {
		before := cand.Hidden()
		if cand, err = pr.pruneUnits(ctx, cand); err != nil {
			return nil, 0, err
		}
		pruned = before - cand.Hidden()
		if ref, err = Refine(ctx, X, Y, cand, RefineOptions{MaxIter: pr.opt.MaxIter, Affine: true, SubsampleOnly: true, Progress: stage}); err != nil {
			return nil, 0, err
		}
		cand = ref.Net
	}
	return cand, pruned, nil
}

// unitsPhrase is "1 unit" or "k units".
func unitsPhrase(k int) string {
	if k == 1 {
		return "1 unit"
	}
	return fmt.Sprintf("%d units", k)
}

// pruneUnits removes units from net by backward elimination until the
// width remains: each step drops the unit whose removal gives the smallest
// loss of a least-squares refit of the output layer and affine term (FitImproper)
// on the refinement's subsample.
func (pr *problem) pruneUnits(ctx context.Context, net *nn.Depth2) (*nn.Depth2, error) {
	rows := min(pr.n, refineRows(newLayout(net).size))
	Xs, Ys := pr.X.Slice(0, rows, 0, pr.d).(*mat.Dense), pr.Y.Slice(0, rows, 0, pr.p).(*mat.Dense)
	for net.Hidden() > pr.opt.Hidden {
		best, bestLoss := -1, math.Inf(1)
		var bestNet *nn.Depth2
		for j := 0; j < net.Hidden(); j++ {
			W, B := withoutUnit(net, j)
			g, err := FitImproper(ctx, Xs, Ys, W, B)
			if err != nil {
				return nil, err
			}
			if l := lossOn(Xs, Ys, g, rows); l < bestLoss {
				best, bestLoss, bestNet = j, l, g
			}
		}
		if best < 0 {
			break
		}
		net = bestNet
	}
	return net, nil
}

// withoutUnit returns W and B with unit j removed.
func withoutUnit(net *nn.Depth2, j int) (*mat.Dense, []float64) {
	m, d := net.W.Dims()
	W := mat.NewDense(m-1, d, nil)
	B := make([]float64, 0, m-1)
	for i, at := 0, 0; i < m; i++ {
		if i == j {
			continue
		}
		W.SetRow(at, net.W.RawRowView(i))
		B = append(B, net.B[i])
		at++
	}
	return W, B
}

// liveUnits counts units with a non-zero row (dropDead's placeholder unit
// does not count).
func liveUnits(net *nn.Depth2) int {
	c := 0
	for i := 0; i < net.Hidden(); i++ {
		if vec.Dot(net.W.RawRowView(i), net.W.RawRowView(i)) > 0 {
			c++
		}
	}
	return c
}

// dropDead removes zero-row units (the placeholder of an affine-only
// network) when other units exist.
func dropDead(net *nn.Depth2) *nn.Depth2 {
	live := liveUnits(net)
	if live == net.Hidden() || live == 0 {
		return net
	}
	m, d := net.W.Dims()
	p := net.Out()
	out := &nn.Depth2{W: mat.NewDense(live, d, nil), B: make([]float64, live), A: mat.NewDense(p, live, nil), C: append([]float64(nil), net.C...)}
	if net.L != nil {
		out.L = mat.DenseCopyOf(net.L)
	}
	at := 0
	for i := 0; i < m; i++ {
		row := net.W.RawRowView(i)
		if vec.Dot(row, row) == 0 {
			continue
		}
		out.W.SetRow(at, row)
		out.B[at] = net.B[i]
		out.A.SetCol(at, mat.Col(nil, i, net.A))
		at++
	}
	return out
}

// affineOnly is the network with no visible unit: one placeholder unit
// (w = 0, b = 0, a = 0, identically zero) and an affine term by least
// squares — Algorithm 5 when Algorithm 4 finds nothing (every unit has a
// large |b_i|, Lemma D.13).
func affineOnly(ctx context.Context, X, Y *mat.Dense) (*nn.Depth2, error) {
	_, d := X.Dims()
	return FitImproper(ctx, X, Y, mat.NewDense(1, d, nil), []float64{0})
}

// addUnits returns net with the units appended (their output weights as
// new columns of A).
func addUnits(net *nn.Depth2, units []Unit) *nn.Depth2 {
	m, d := net.W.Dims()
	p := net.Out()
	k := len(units)
	out := &nn.Depth2{W: mat.NewDense(m+k, d, nil), B: make([]float64, m+k), A: mat.NewDense(p, m+k, nil), C: append([]float64(nil), net.C...)}
	if net.L != nil {
		out.L = mat.DenseCopyOf(net.L)
	}
	for i := 0; i < m; i++ {
		out.W.SetRow(i, net.W.RawRowView(i))
		out.B[i] = net.B[i]
		out.A.SetCol(i, mat.Col(nil, i, net.A))
	}
	for j, u := range units {
		out.W.SetRow(m+j, u.W)
		out.B[m+j] = u.B
		out.A.SetCol(m+j, u.A)
	}
	return out
}

// silentScale is how small, relative to the rms of Y, a unit's contribution
// ‖a_i‖·rms(ReLU(w_i·x + b_i)) must be for pruneSilent to try removing it:
// 1e-10 for float64 data, and 4·u for coarser data (the zero of zeroLoss),
// below which float32 data cannot show a unit at all (a float32 copy of a
// 10-unit network came back with two extra units of contribution 1e-9).
func silentScale(u float64) float64 {
	return math.Max(1e-10, 4*u)
}

// pruneSilent removes units whose contribution to the output is below
// silentScale of the data's scale — leftovers of deflation whose output
// weights the refinement drove to ~1e-13 instead of 0 — when the network
// without them fits the data at least as well as certTol (or as before).
// Without it a 5-unit network could come back with a sixth, silent unit
// and fail to load into the user's nn.Linear(d, 5).
func (pr *problem) pruneSilent(net *nn.Depth2) *nn.Depth2 {
	m := net.Hidden()
	if liveUnits(net) <= 1 {
		return net
	}
	rows := min(pr.n, 4096)
	sub := pr.X.Slice(0, rows, 0, pr.d).(*mat.Dense)
	H := mat.NewDense(rows, m, nil)
	H.Mul(sub, net.W.T())
	// mat.Norm(·, 2) of a matrix is the Frobenius norm.
	yScale := mat.Norm(pr.Y.Slice(0, rows, 0, pr.p), 2) / math.Sqrt(float64(rows*pr.p))
	pruned := &nn.Depth2{W: mat.DenseCopyOf(net.W), B: append([]float64(nil), net.B...), A: mat.DenseCopyOf(net.A), C: append([]float64(nil), net.C...)}
	if net.L != nil {
		pruned.L = mat.DenseCopyOf(net.L)
	}
	removed := 0
	for i := 0; i < m; i++ {
		var ss float64
		for r := 0; r < rows; r++ {
			if z := H.At(r, i) + net.B[i]; z > 0 {
				ss += z * z
			}
		}
		if mat.Norm(net.A.ColView(i), 2)*math.Sqrt(ss/float64(rows)) > silentScale(pr.roundoff)*yScale {
			continue
		}
		pruned.W.SetRow(i, make([]float64, pr.d))
		removed++
	}
	if removed == 0 || removed == liveUnits(net) {
		return net
	}
	pruned = dropDead(pruned)
	if r := pr.residual(pruned); r > max(pr.opt.CertTol, pr.residual(net)) {
		return net
	}
	return pruned
}
