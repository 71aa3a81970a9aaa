package extract

import (
	"math"

	"github.com/relurec/relurec/nn"
	"gonum.org/v1/gonum/mat"
)

// Standard Gaussian queries leave some weights between hidden units
// unseen: a weight acts only where its unit and the unit it weighs are
// both active, and on a trained network such a pair can be active
// together on 1 in 20 000 Gaussian inputs or on none. Fitted on Gaussian
// queries alone, such a weight is whatever the fit leaves it, and a
// certificate on Gaussian queries does not see it. coverRows gives every
// pair rows where it acts, for the last layers' fit and for the checks.

// coverCandidates is how many inputs coverRows draws at each of
// coverScales (through the network it is given, no query spent on them).
const coverCandidates = 8 * patternSamples

// coverScales are the standard deviations of coverRows' Gaussian inputs:
// wider inputs reach activation patterns standard Gaussian ones seldom
// do (on the trained 784-32-16-16-10 seed 0, a third-layer unit and a
// second-layer unit it weighs are active together on 1, 15 and 38 of
// 20 000 inputs at 1, 2 and 4).
var coverScales = []float64{1, 2, 4}

// coverPerPair is how many rows coverRows gives each pair of a unit and
// one of its inputs.
const coverPerPair = 8

// Ascent for the pairs the scales leave short: at most coverAscents runs
// of coverSteps sign steps of coverStep per coordinate, the input kept
// within coverRadius·√d (the largest of coverScales).
const (
	coverAscents = 256
	coverSteps   = 400
	coverStep    = 0.05
	coverRadius  = 4
)

// coverRows returns inputs where each weight between hidden units of
// net, from its layer from (0-based, at least 1) to its last hidden
// layer, acts: for every unit j of such a layer and unit i of the layer
// before, rows where j and i are both active in net until the pair has
// coverPerPair of them, counting the rows of have first. They are taken
// in order from coverCandidates Gaussian inputs at each of coverScales,
// the scales in turn until every pair has its rows; the pairs still short
// are then searched for by gradient ascent on the smaller of the two
// pre-activations from Gaussian starts (ascend), each input found counted
// for every pair it serves. At most limit rows (0: no limit); nil when
// no row is needed or found.
func coverRows(net *nn.MLP, from int, have *mat.Dense, seed uint64, limit int) *mat.Dense {
	last := len(net.Layers) - 2
	if from > last {
		return nil
	}
	if limit <= 0 {
		limit = math.MaxInt
	}
	c := newCoverCount(net, from)
	if have != nil {
		c.addRows(net, have, nil)
	}
	var rows []*mat.Dense
	got := 0
	for si, scale := range coverScales {
		if c.short == 0 || got >= limit {
			break
		}
		C := gaussianRows(coverCandidates, net.In(), seed+uint64(si)*0x9e3779b97f4a7c15)
		C.Scale(scale, C)
		if keep := c.addRows(net, C, func() bool { got++; return got < limit }); len(keep) > 0 {
			rows = append(rows, rowsOf(C, keep))
		}
	}
	if got < limit {
		if found := c.ascendShort(net, seed, limit-got); found != nil {
			rows = append(rows, found)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	out := rows[0]
	for _, M := range rows[1:] {
		var S mat.Dense
		S.Stack(out, M)
		out = &S
	}
	return out
}

// coverCount counts, per pair of a unit of layer l (from to the last
// hidden layer) and a unit of layer l−1, the rows kept where both are
// active, up to coverPerPair.
type coverCount struct {
	from, last int
	count      [][]int // count[l][j·in + i]
	short      int     // pairs below coverPerPair
}

func newCoverCount(net *nn.MLP, from int) *coverCount {
	c := &coverCount{from: from, last: len(net.Layers) - 2, count: make([][]int, len(net.Layers))}
	for l := from; l <= c.last; l++ {
		c.count[l] = make([]int, net.Layers[l].Out()*net.Layers[l].In())
		c.short += len(c.count[l])
	}
	return c
}

// addRows counts the rows of X in order and returns those that serve a
// pair still short; after each such row, more (when non-nil) says whether
// to go on.
func (c *coverCount) addRows(net *nn.MLP, X *mat.Dense, more func() bool) []int {
	outs := make([]*mat.Dense, c.last+1) // outs[l] is layer l's output
	outs[c.from-1] = net.Hidden(X, c.from-1)
	for l := c.from; l <= c.last; l++ {
		outs[l] = (&nn.MLP{Layers: net.Layers[l : l+1]}).Forward(outs[l-1])
	}
	n, _ := X.Dims()
	var keep []int
	for s := 0; s < n && c.short > 0; s++ {
		if c.add(func(l int) []float64 { return outs[l].RawRowView(s) }) {
			keep = append(keep, s)
			if more != nil && !more() {
				break
			}
		}
	}
	return keep
}

// add counts a row given its layers' outputs (out(l) for layers from−1
// to last) and reports whether it serves a pair still short.
func (c *coverCount) add(out func(l int) []float64) bool {
	use := false
	for l := c.from; l <= c.last; l++ {
		in, o := out(l-1), out(l)
		for j, z := range o {
			if z <= 0 {
				continue
			}
			for i, v := range in {
				if n := &c.count[l][j*len(in)+i]; v > 0 && *n < coverPerPair {
					if *n++; *n == coverPerPair {
						c.short--
					}
					use = true
				}
			}
		}
	}
	return use
}

// ascendShort searches inputs for the pairs still short, at most
// coverAscents runs of ascend from standard Gaussian starts, and returns
// up to limit of them that serve a short pair (nil when none do).
func (c *coverCount) ascendShort(net *nn.MLP, seed uint64, limit int) *mat.Dense {
	if c.short == 0 || coverAscents == 0 {
		return nil
	}
	d := net.In()
	starts := gaussianRows(coverAscents, d, seed^0x632be59bd9b4e019)
	var found [][]float64
	runs := 0
	for l := c.from; l <= c.last && runs < coverAscents; l++ {
		in := net.Layers[l].In()
		for p, n := range c.count[l] {
			if n >= coverPerPair {
				continue
			}
			j, i := p/in, p%in
			for c.count[l][p] < coverPerPair && runs < coverAscents && len(found) < limit {
				x := append([]float64(nil), starts.RawRowView(runs)...)
				runs++
				if !ascend(net, x, l, j, i) {
					break // no input reached: the pair may never act
				}
				pre := preActivations(net, x)
				if c.add(func(k int) []float64 { return relu(pre[k]) }) {
					found = append(found, x)
				}
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	out := mat.NewDense(len(found), d, nil)
	for r, x := range found {
		out.SetRow(r, x)
	}
	return out
}

// ascend moves x towards inputs where unit j of layer l and unit i of
// layer l−1 of net are both active: sign steps (coverStep per coordinate)
// up the smaller of their pre-activations, ‖x‖ held within
// coverRadius·√d, until both are positive or coverSteps steps. It reports
// whether both are positive at the end.
func ascend(net *nn.MLP, x []float64, l, j, i int) bool {
	radius := coverRadius * math.Sqrt(float64(len(x)))
	for step := 0; ; step++ {
		pre := preActivations(net, x)
		a, b := pre[l-1][i], pre[l][j]
		if a > 0 && b > 0 {
			return true
		}
		if step == coverSteps {
			return false
		}
		layer, unit := l-1, i
		if b < a {
			layer, unit = l, j
		}
		g := preGradient(net, pre, layer, unit)
		moved := false
		for c, v := range g {
			if v > 0 {
				x[c] += coverStep
				moved = true
			} else if v < 0 {
				x[c] -= coverStep
				moved = true
			}
		}
		if !moved {
			return false // every path to the unit is inactive
		}
		if n := math.Sqrt(dotf(x, x)); n > radius {
			for c := range x {
				x[c] *= radius / n
			}
		}
	}
}

// preActivations returns the pre-activations of every layer of net at x.
func preActivations(net *nn.MLP, x []float64) [][]float64 {
	pre := make([][]float64, len(net.Layers))
	h := x
	for l, layer := range net.Layers {
		z := make([]float64, layer.Out())
		for r := range z {
			z[r] = dotf(layer.Weight.RawRowView(r), h) + layer.Bias[r]
		}
		pre[l] = z
		h = relu(z)
	}
	return pre
}

// preGradient returns the gradient with respect to the input of the
// pre-activation of unit u of layer l, at the point whose pre-activations
// are pre (the activation pattern there held).
func preGradient(net *nn.MLP, pre [][]float64, l, u int) []float64 {
	g := append([]float64(nil), net.Layers[l].Weight.RawRowView(u)...)
	for k := l - 1; k >= 0; k-- {
		W := net.Layers[k].Weight
		_, cols := W.Dims()
		next := make([]float64, cols)
		for r, v := range g {
			if v == 0 || pre[k][r] <= 0 {
				continue
			}
			for c, w := range W.RawRowView(r) {
				next[c] += v * w
			}
		}
		g = next
	}
	return g
}

// relu returns max(z, 0) entrywise, in a new slice.
func relu(z []float64) []float64 {
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = max(v, 0)
	}
	return out
}
