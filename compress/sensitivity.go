package compress

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// RankProfile is the evidence behind a measured allocation (AllocSensitivity,
// AllocASVD): for one layer, the relative error of the network's output on
// the calibration rows, ‖f̂(X) − f(X)‖_F/‖f(X)‖_F, when that layer alone is
// compressed to each grid rank and every other layer is left as it is.
type RankProfile struct {
	Layer  int       `json:"layer"`
	Ranks  []int     `json:"ranks"`
	Params []int     `json:"params"`
	Error  []float64 `json:"error"`
}

// maxWorth is the largest rank that stores fewer parameters than the dense
// layer (0 when none does).
func (c layerCost) maxWorth() int {
	r := 0
	for c.worthFactoring(r + 1) {
		r++
	}
	return r
}

// rankGrid is the ranks a measured allocation evaluates: 1, 2, 3, 4, 6, 8,
// 12, 16, 24, … (powers of two and their halfway points 1.5·2^k) below top,
// then top. Geometric, because the error changes fastest at small ranks.
func rankGrid(top int) []int {
	var g []int
	for p := 1; p < top; p *= 2 {
		g = append(g, p)
		if h := p + p/2; p >= 2 && h < top {
			g = append(g, h)
		}
	}
	if top >= 1 {
		g = append(g, top)
	}
	return slices.Compact(g)
}

// originalFits fits every layer that can be factored on the original
// network's activations (X̌ = X) with the method; nil for layers that stay
// dense whatever the budget.
func originalFits(ctx context.Context, net *nn.MLP, ws, xs, ys []*mat.Dense, costs []layerCost, method Method, lo LayerOptions) ([]*Fit, error) {
	fits := make([]*Fit, len(ws))
	for i, l := range net.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if costs[i].maxWorth() == 0 {
			continue
		}
		f, err := FitLayer(Problem{W: ws[i], Bias: l.Bias, Act: l.Act, X: xs[i], y: ys[i]}, method, lo)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		fits[i] = f
	}
	return fits, nil
}

// measureCurves measures, for every layer with a fit, the squared relative
// output error of the network with only that layer compressed, at the grid
// ranks, and interpolates it linearly to every rank 1…maxWorth: curves[i][r−1]
// (nil for layers without a fit). The dense layer's error is 0.
func measureCurves(ctx context.Context, net *nn.MLP, ws, xs []*mat.Dense, costs []layerCost, fits []*Fit) ([][]float64, []RankProfile, error) {
	L := len(net.Layers)
	ref := xs[L]
	refNorm := math.Max(mat.Norm(ref, 2), 1e-300)
	curves := make([][]float64, L)
	var profiles []RankProfile
	for i, f := range fits {
		if f == nil {
			continue
		}
		top := costs[i].maxWorth()
		grid := rankGrid(top)
		prof := RankProfile{Layer: i, Ranks: grid}
		sq := make([]float64, len(grid))
		for g, r := range grid {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			x := activate(f.Rank(r).Apply(xs[i]), net.Layers[i].Act)
			for j := i + 1; j < L; j++ {
				x = activate(preact(x, ws[j], net.Layers[j].Bias), net.Layers[j].Act)
			}
			e := diffNorm(ref, x) / refNorm
			sq[g] = e * e
			prof.Params = append(prof.Params, costs[i].factoredParams(r))
			prof.Error = append(prof.Error, e)
		}
		curve := make([]float64, top)
		for g := 0; g+1 < len(grid); g++ {
			a, b := grid[g], grid[g+1]
			for r := a; r < b; r++ {
				curve[r-1] = sq[g] + (sq[g+1]-sq[g])*float64(r-a)/float64(b-a)
			}
		}
		curve[top-1] = sq[len(sq)-1]
		curves[i] = curve
		profiles = append(profiles, prof)
	}
	return curves, profiles, nil
}

// curveAt is layer i's score at step k of its curve: rank k for
// k ≤ len(curve), the dense layer (0) at k = len(curve)+1.
func curveAt(curve []float64, k int) float64 {
	if k > len(curve) {
		return 0
	}
	return curve[k-1]
}

// paramsAt is the parameter count at step k (see curveAt).
func paramsAt(c layerCost, curve []float64, k int) int {
	if k > len(curve) {
		return c.dense
	}
	return c.factoredParams(k)
}

// allocateMeasured splits the budget over layers by one of the measured
// allocations. curves are from measureCurves (AllocSensitivity, AllocASVD);
// fits from originalFits (AllocSVDLLM2). It returns ranks (0 = dense) and
// the parameter total, never above budget.
func allocateMeasured(costs []layerCost, curves [][]float64, fits []*Fit, budget int, strategy Allocation) ([]int, int, error) {
	n := len(costs)
	// step[i]: 1…len(curve) is that rank, len(curve)+1 the dense layer.
	step := make([]int, n)
	ranks, dense, total, err := cheapest(costs, budget)
	if err != nil {
		return nil, 0, err
	}
	copy(step, ranks)
	finish := func() ([]int, int, error) {
		total := 0
		for i, c := range costs {
			switch {
			case dense[i] || step[i] > c.maxWorth():
				ranks[i] = 0
				total += c.dense
			default:
				ranks[i] = step[i]
				total += c.factoredParams(step[i])
			}
		}
		if total > budget {
			return nil, 0, fmt.Errorf("compress: internal error: %s allocation needs %d parameters, budget %d", strategy, total, budget)
		}
		return ranks, total, nil
	}
	switch strategy {
	case AllocSensitivity:
		// Greedy on the lower convex hull: the step, to any larger rank or
		// to the dense layer, that removes the most error per parameter.
		for {
			best, bestK, bestGain := -1, 0, 0.0
			for i, c := range costs {
				cv := curves[i]
				if dense[i] || cv == nil {
					continue
				}
				k0 := step[i]
				p0, s0 := paramsAt(c, cv, k0), curveAt(cv, k0)
				for k := k0 + 1; k <= len(cv)+1; k++ {
					dc := paramsAt(c, cv, k) - p0
					if total+dc > budget {
						break
					}
					if g := (s0 - curveAt(cv, k)) / float64(dc); g > bestGain {
						best, bestK, bestGain = i, k, g
					}
				}
			}
			if best < 0 {
				break
			}
			total += paramsAt(costs[best], curves[best], bestK) - paramsAt(costs[best], curves[best], step[best])
			step[best] = bestK
		}
		return finish()
	case AllocASVD:
		// Every layer at the smallest step whose error is ≤ t; t the
		// smallest of the measured values that fits the budget.
		var ts []float64
		for _, cv := range curves {
			ts = append(ts, cv...)
		}
		ts = append(ts, 0)
		slices.Sort(ts)
		ts = slices.Compact(ts)
		at := func(t float64) int {
			tot := 0
			for i, c := range costs {
				cv := curves[i]
				if dense[i] || cv == nil {
					tot += c.dense
					continue
				}
				k := 1
				for k <= len(cv) && curveAt(cv, k) > t {
					k++
				}
				step[i] = k
				tot += paramsAt(c, cv, k)
			}
			return tot
		}
		// The largest t holds every layer at rank 1, which fits (cheapest).
		j := sort.Search(len(ts), func(j int) bool { return at(ts[j]) <= budget })
		at(ts[j])
		return finish()
	case AllocSVDLLM2:
		uni, _, err := allocate(costs, nil, budget, AllocUniform)
		if err != nil {
			return nil, 0, err
		}
		w := make([]float64, n)
		var sum float64
		groups := 0
		for i, f := range fits {
			if dense[i] || f == nil || uni[i] == 0 {
				continue
			}
			w[i] = 1 / math.Max(math.Log(f.Residual(uni[i])), 1e-6)
			sum += w[i]
			groups++
		}
		if groups == 0 {
			return finish()
		}
		wmin := math.Inf(1)
		for i := range w {
			if w[i] > 0 {
				w[i] *= float64(groups) / sum
				wmin = math.Min(wmin, w[i])
			}
		}
		// Removed fraction σ·w_i: kept fraction 1 − σ·w_i of the dense
		// parameters, as a rank; σ = 1/wmin cuts every layer to rank 1.
		at := func(sigma float64) int {
			tot := 0
			for i, c := range costs {
				if w[i] == 0 { // kept dense whatever the budget
					tot += c.dense
					continue
				}
				top := c.maxWorth()
				kept := 1 - sigma*w[i]
				r := int(math.Floor((kept*float64(c.dense) - float64(c.fixed)) / float64(c.perRank)))
				switch {
				case kept >= 1:
					r = top + 1 // dense
				case r > top:
					r = top
				case r < 1:
					r = 1
				}
				step[i] = r
				if r > top {
					tot += c.dense
				} else {
					tot += c.factoredParams(r)
				}
			}
			return tot
		}
		lo, hi := 0.0, 1/wmin
		if at(lo) > budget {
			for it := 0; it < 100 && hi-lo > 1e-12*hi; it++ {
				mid := (lo + hi) / 2
				if at(mid) <= budget {
					hi = mid
				} else {
					lo = mid
				}
			}
			lo = hi
		}
		at(lo)
		return finish()
	}
	return nil, 0, fmt.Errorf("compress: unknown allocation %q: %w", strategy, ErrInput)
}
