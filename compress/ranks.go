package compress

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// Allocation strategies for a global parameter budget (Options.Keep).
// Allocation is how Options.Keep is split over the layers.
type Allocation string

// The allocations.
const (
	// AllocGlobal (the zero value's; FastOptions) spends the budget
	// greedily where it buys the most: the next rank goes to the layer whose next singular direction
	// removes the largest fraction of that layer's energy per parameter it
	// costs (in the spirit of Li & Shi's budgeted rank selection, [ZS25]'s
	// reference [28]). Small layers, such as a classifier's last one, stay accurate.
	AllocGlobal Allocation = "global"
	// AllocUniform gives every layer the same fraction of its own
	// parameters, r_i = ⌊(keep·P_i − bias_i)/(d_i + d2_i)⌋ ≥ 1; tiny
	// layers get rank 1.
	AllocUniform Allocation = "uniform"
	// AllocSensitivity minimises the end-to-end error under the budget. It
	// measures, for each layer alone and a geometric grid of ranks (1, 2, 3,
	// 4, 6, 8, 12, …), the squared relative error ‖f̂(X) − f(X)‖²_F/‖f(X)‖²_F
	// of the network's output on the first 4096 calibration rows when only
	// that layer is compressed (with Options.Method, fitted on the original
	// inputs; with Sequential and MethodData the later layers are refit by
	// least squares on the compressed stream, as Alg 3 does), interpolates
	// it to every rank (geometrically), and spends the budget greedily on
	// the step — to any larger rank or to the dense layer — that removes the
	// most of that error per parameter (the convex-hull greedy of budgeted
	// rank selection, [ZS25]'s reference [28], with a measured rather than a spectral
	// objective). It then measures each layer at the rank it got and the
	// next, and allocates again, until those are measured (≤ 8 rounds), so
	// that no decision rests on an interpolated value. It assumes the
	// layers' errors add, which holds to first order for small
	// perturbations. Cost: one fit per layer on the original activations
	// (reused where a layer is fit on them again) and ~40–60 passes of the
	// rest of the network (with refits) over 4096 rows.
	AllocSensitivity Allocation = "sensitivity"
	// AllocASVD is a baseline: ASVD's sensitivity-based truncation rank
	// search (Yuan et al. 2023, §3.3) on the same measured errors as
	// AllocSensitivity (same grid, refits and refinement rounds): every
	// layer takes the smallest rank whose error
	// (that layer alone compressed) is at most a common threshold, and the
	// threshold is the smallest that fits the budget (binary search over
	// the sorted errors). ASVD measures perplexity at parameter ratios
	// 0.1…0.9; here the score is the output error (no labels) and the grid
	// is AllocSensitivity's, so that budgets below 0.1 are reachable.
	AllocASVD Allocation = "asvd-search"
	// AllocSVDLLM2 is a baseline: SVD-LLM V2's heterogeneous compression
	// ratio allocation [WAWSZ25] (with MethodSVDLLM2 the paper's
	// whole method). The layers are grouped by matrix type (matrixTypes:
	// the name without its block index, and the shape — an MLP's layers
	// by shape alone); each group meets the target ratio R, the uniform
	// rule's, and within it each layer's theoretical truncation loss L_i
	// at ratio R (SVD-LLM's minimum of ‖XW − XŴ‖_F, whatever the method
	// then fitting the layers) sets its removed fraction ∝ 1/log L_i, so
	// that layers losing more are cut less. A layer alone of its type, as
	// each layer of an MLP of distinct widths, keeps the uniform ratio. The
	// last layer (the classifier) stays dense when the budget allows, as
	// SVD-LLM leaves a language model's output head alone. Where the paper
	// leaves a detail open, relurec's choice (scaleGroup): a group keeps
	// exactly what the uniform rule gives it, found by bisection of the
	// common scale of the fractions (the paper's formula up to rank
	// rounding), and log L_i is floored at 10⁻⁶.
	AllocSVDLLM2 Allocation = "svd-llm-v2"
	// AllocAuto is AllocSensitivity where the network's output can be
	// measured with one layer compressed (an MLP, a graph) and Keep is at
	// most Options.AutoMaxKeep, and AllocGlobal elsewhere (a CNN, a larger
	// budget): the best measured rule for the budget (DefaultOptions;
	// Allocation.Resolve).
	AllocAuto Allocation = "auto"
)

// Resolve returns the allocation a names for a network that can (probe)
// or cannot be probed, at budget keep, with Options.AutoMaxKeep maxKeep:
// AllocAuto's choice, else a.
func (a Allocation) Resolve(probe bool, keep, maxKeep float64) Allocation {
	if a != AllocAuto {
		return a
	}
	if probe && keep <= maxKeep {
		return AllocSensitivity
	}
	return AllocGlobal
}

// CanProbe reports whether the measured allocations (sensitivity, asvd)
// can run on net: an MLP or a graph, whose output error is measured with
// one layer compressed at a time. AllocAuto chooses them only there.
func CanProbe(net nn.Network) bool {
	switch net.(type) {
	case *nn.MLP, *nn.Graph:
		return true
	}
	return false
}

// Allocations lists the allocation names, in the order the docs present
// them.
var Allocations = []Allocation{AllocAuto, AllocGlobal, AllocUniform, AllocSensitivity, AllocASVD, AllocSVDLLM2}

// measured reports whether an allocation needs per-layer fits on the
// calibration data before the ranks are chosen.
func (a Allocation) measured() bool {
	return a == AllocSensitivity || a == AllocASVD || a == AllocSVDLLM2
}

// probes reports whether an allocation measures the network's output with
// each layer compressed (a probe), which only a prober offers.
func (a Allocation) probes() bool {
	return a == AllocSensitivity || a == AllocASVD
}

// layerCost describes one layer's parameter accounting.
type layerCost struct {
	perRank int // parameters per unit of rank: d + d2 (+1 with the bias inside the rank)
	fixed   int // parameters independent of the rank (a dense bias)
	dense   int // parameters of the dense layer, weights and bias
	maxRank int // largest rank the fit offers
}

// factoredParams is the parameter count at rank r.
func (c layerCost) factoredParams(r int) int { return c.fixed + r*c.perRank }

// worthFactoring reports whether rank r stores fewer parameters than the
// dense layer.
func (c layerCost) worthFactoring(r int) bool {
	return r >= 1 && r <= c.maxRank && c.factoredParams(r) < c.dense
}

// allocate distributes a budget of parameters over layers. It returns, per
// layer, the rank (0 = keep the layer dense) and the total parameter count,
// which never exceeds budget. spectra[i] are layer i's singular values
// (descending); energy fractions are relative to each layer's total.
func allocate(costs []layerCost, spectra [][]float64, budget int, strategy Allocation) ([]int, int, error) {
	n := len(costs)
	ranks, dense, total, err := cheapest(costs, budget)
	if err != nil {
		return nil, 0, err
	}
	cost := func(i int) int {
		if dense[i] {
			return costs[i].dense
		}
		return costs[i].factoredParams(ranks[i])
	}
	switch strategy {
	case AllocUniform:
		total = 0
		for i, c := range costs {
			if dense[i] {
				total += c.dense
				continue
			}
			frac := float64(budget) / float64(sumDense(costs))
			r := int(math.Floor((frac*float64(c.dense) - float64(c.fixed)) / float64(c.perRank)))
			r = max(1, min(r, c.maxRank))
			if !c.worthFactoring(r) {
				// The share would reach the break-even rank: keep dense
				// only if that still fits, else the largest useful rank.
				r = 1
				for c.worthFactoring(r + 1) {
					r++
				}
			}
			ranks[i] = r
			total += c.factoredParams(r)
		}
		// The floors above can overshoot only through the rank-1 minimum;
		// trim the largest layers' ranks until the budget holds.
		for total > budget {
			best := -1
			for i := range costs {
				if !dense[i] && ranks[i] > 1 && (best < 0 || costs[i].perRank > costs[best].perRank) {
					best = i
				}
			}
			if best < 0 {
				return nil, 0, fmt.Errorf("compress: cannot meet a budget of %d parameters: %w", budget, ErrInput)
			}
			ranks[best]--
			total -= costs[best].perRank
		}
		for i := range ranks {
			if dense[i] {
				ranks[i] = 0
			}
		}
		return ranks, total, nil
	case AllocGlobal, "":
	default:
		return nil, 0, fmt.Errorf("compress: unknown allocation %q (expected global or uniform; the measured ones go through allocateMeasured): %w", strategy, ErrInput)
	}
	energy := make([]float64, n)
	for i, s := range spectra {
		for _, x := range s {
			energy[i] += x * x
		}
	}
	for {
		best, bestGain, bestCost := -1, -1.0, 0
		for i, c := range costs {
			if dense[i] {
				continue
			}
			s := spectra[i]
			var gain float64
			var dc int
			if c.worthFactoring(ranks[i] + 1) {
				if ranks[i] < len(s) && energy[i] > 0 {
					gain = s[ranks[i]] * s[ranks[i]] / energy[i]
				}
				dc = c.perRank
			} else {
				// The next step is the dense layer: it removes all the
				// remaining error of this layer.
				for k := ranks[i]; k < len(s); k++ {
					gain += s[k] * s[k]
				}
				if energy[i] > 0 {
					gain /= energy[i]
				}
				dc = c.dense - cost(i)
			}
			if dc <= 0 || total+dc > budget {
				continue
			}
			if g := gain / float64(dc); g > bestGain {
				best, bestGain, bestCost = i, g, dc
			}
		}
		if best < 0 || bestGain <= 0 {
			break
		}
		total += bestCost
		if costs[best].worthFactoring(ranks[best] + 1) {
			ranks[best]++
		} else {
			dense[best] = true
		}
	}
	for i := range ranks {
		if dense[i] {
			ranks[i] = 0
		}
	}
	return ranks, total, nil
}

// cheapest starts every layer at its cheapest form: rank 1, or dense
// (dense[i]) when even rank 1 would not save parameters. It returns the
// ranks, the dense flags and the parameter total, or an error wrapping
// ErrInput when that already exceeds the budget.
func cheapest(costs []layerCost, budget int) ([]int, []bool, int, error) {
	ranks := make([]int, len(costs))
	dense := make([]bool, len(costs))
	total := 0
	for i, c := range costs {
		if c.worthFactoring(1) {
			ranks[i] = 1
			total += c.factoredParams(1)
		} else {
			dense[i] = true
			total += c.dense
		}
	}
	if total > budget {
		return nil, nil, 0, fmt.Errorf("compress: a budget of %d parameters cannot hold the network: rank 1 in every layer already needs %d: %w", budget, total, ErrInput)
	}
	return ranks, dense, total, nil
}

func sumDense(costs []layerCost) int {
	s := 0
	for _, c := range costs {
		s += c.dense
	}
	return s
}

// rankForEnergy returns the smallest r whose leading singular values hold at
// least the fraction e of Σ s².
func rankForEnergy(s []float64, e float64) int {
	var tot float64
	for _, x := range s {
		tot += x * x
	}
	if tot == 0 {
		return 1
	}
	var cum float64
	for k, x := range s {
		cum += x * x
		if cum >= e*tot*(1-1e-12) {
			return k + 1
		}
	}
	return len(s)
}

// errorCurve returns, for r = 1..k, the squared calibration error
// ‖T − P_r·V_rᵀ‖_F² of the rank-r truncations of a fit, where T is the
// target the factors reproduce and P = Z·A0 (Z the inputs as the fit uses
// them). It is exact for every method (V need not be orthonormal) and costs
// O(m·k·(p + d2) + k²·d2).
func errorCurve(t, z, a0, v *mat.Dense) []float64 {
	var p, tv, gp, gv mat.Dense
	p.Mul(z, a0)
	tv.Mul(t, v)
	gp.Mul(p.T(), &p)
	gv.Mul(v.T(), v)
	_, k := p.Dims()
	m, _ := p.Dims()
	c := make([]float64, k)
	for j := 0; j < k; j++ {
		var s float64
		for i := 0; i < m; i++ {
			s += p.At(i, j) * tv.At(i, j)
		}
		c[j] = s
	}
	tn := mat.Norm(t, 2)
	e := tn * tn
	out := make([]float64, k)
	for r := 0; r < k; r++ {
		e -= 2 * c[r]
		for l := 0; l < r; l++ {
			e += 2 * gp.At(r, l) * gv.At(r, l)
		}
		e += gp.At(r, r) * gv.At(r, r)
		out[r] = math.Max(e, 0)
	}
	return out
}
