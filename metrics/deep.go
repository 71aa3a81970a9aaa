package metrics

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// MLPError is the distance between two ReLU MLPs of the same shape up to
// their symmetries: a permutation of each hidden layer's units and a
// positive scaling of each unit (pushed into the next layer's column).
type MLPError struct {
	// Layers holds one entry per Linear layer, input side first (the
	// last is the output layer).
	Layers []LayerError `json:"layers"`
	// MaxRel is the largest relative error over all weight and bias
	// tensors: the "every parameter within" figure.
	MaxRel float64 `json:"max_rel"`
}

// LayerError is one layer's parameter error after alignment: the largest
// absolute entry error of its weights and biases, and the same relative
// to the truth's largest entry of each.
type LayerError struct {
	MaxErrW float64 `json:"max_err_w"`
	MaxErrB float64 `json:"max_err_b"`
	RelW    float64 `json:"rel_w"`
	RelB    float64 `json:"rel_b"`
	// Perm[i] is the estimate's unit matched to the truth's unit i
	// (hidden layers only).
	Perm []int `json:"perm,omitempty"`
}

// CompareMLP measures how far est is from truth, two networks of Linear
// layers with ReLU between them (any depth, the same widths), up to the
// symmetries of ReLU networks: both are normalised hidden layer by hidden
// layer (each unit's weight row scaled to unit norm, its bias with it, the
// scale moved into the next layer's column), then each hidden layer's
// units are matched by the assignment minimising Σ ‖w − ŵ‖² + (b − b̂)²
// (Hungarian), the next layer's columns permuted to follow. A unit with a
// zero weight row gives ErrZeroRow; shapes that differ, ErrShape.
func CompareMLP(truth, est *nn.MLP) (MLPError, error) {
	if err := sameShape(truth, est); err != nil {
		return MLPError{}, fmt.Errorf("metrics.CompareMLP: %w", err)
	}
	T, err := normalisedLayers("truth", truth)
	if err != nil {
		return MLPError{}, fmt.Errorf("metrics.CompareMLP: %w", err)
	}
	E, err := normalisedLayers("est", est)
	if err != nil {
		return MLPError{}, fmt.Errorf("metrics.CompareMLP: %w", err)
	}
	var res MLPError
	for l := range T {
		lt, le := T[l], E[l]
		m, _ := lt.W.Dims()
		var le2 layerParams
		var perm []int
		if l < len(T)-1 {
			perm = matchUnits(lt, le)
			le2 = le.permuteRows(perm)
			E[l+1] = E[l+1].permuteCols(perm)
		} else {
			le2 = le
		}
		var e LayerError
		e.Perm = perm
		wmax, bmax := 0.0, 0.0
		for i := 0; i < m; i++ {
			rt, re := lt.W.RawRowView(i), le2.W.RawRowView(i)
			for j := range rt {
				e.MaxErrW = math.Max(e.MaxErrW, math.Abs(rt[j]-re[j]))
				wmax = math.Max(wmax, math.Abs(rt[j]))
			}
			e.MaxErrB = math.Max(e.MaxErrB, math.Abs(lt.b[i]-le2.b[i]))
			bmax = math.Max(bmax, math.Abs(lt.b[i]))
		}
		e.RelW = e.MaxErrW / math.Max(wmax, math.SmallestNonzeroFloat64)
		e.RelB = e.MaxErrB
		if bmax > 0 {
			e.RelB = e.MaxErrB / bmax
		}
		res.MaxRel = math.Max(res.MaxRel, math.Max(e.RelW, e.RelB))
		res.Layers = append(res.Layers, e)
	}
	return res, nil
}

// layerParams is one Linear layer's weights and biases (zeros for none).
type layerParams struct {
	W *mat.Dense
	b []float64
}

func (lp layerParams) permuteRows(perm []int) layerParams {
	m, n := lp.W.Dims()
	out := layerParams{W: mat.NewDense(m, n, nil), b: make([]float64, m)}
	for i, j := range perm {
		out.W.SetRow(i, lp.W.RawRowView(j))
		out.b[i] = lp.b[j]
	}
	return out
}

func (lp layerParams) permuteCols(perm []int) layerParams {
	m, n := lp.W.Dims()
	out := layerParams{W: mat.NewDense(m, n, nil), b: lp.b}
	for i := 0; i < m; i++ {
		src, dst := lp.W.RawRowView(i), out.W.RawRowView(i)
		for c, j := range perm {
			dst[c] = src[j]
		}
	}
	return out
}

// sameShape checks that both networks are Linear layers of the same
// sizes with ReLU after every one but the last.
func sameShape(a, b *nn.MLP) error {
	if a == nil || b == nil || len(a.Layers) < 2 || len(a.Layers) != len(b.Layers) {
		return fmt.Errorf("%w: need two networks with the same number (≥ 2) of layers", ErrShape)
	}
	for l := range a.Layers {
		la, lb := a.Layers[l], b.Layers[l]
		if la.Weight == nil || lb.Weight == nil || la.In() != lb.In() || la.Out() != lb.Out() {
			return fmt.Errorf("%w: layer %d differs in shape", ErrShape, l)
		}
		want := nn.ReLU
		if l == len(a.Layers)-1 {
			want = nn.Identity
		}
		if la.Act != want || lb.Act != want {
			return fmt.Errorf("%w: layer %d's activation is not %s", ErrShape, l, want)
		}
	}
	return nil
}

// normalisedLayers returns the network's layers with every hidden unit's
// weight row of unit norm (bias divided alike, the next layer's column
// multiplied).
func normalisedLayers(name string, net *nn.MLP) ([]layerParams, error) {
	out := make([]layerParams, len(net.Layers))
	for l, ly := range net.Layers {
		m, _ := ly.Weight.Dims()
		out[l] = layerParams{W: mat.DenseCopyOf(ly.Weight), b: make([]float64, m)}
		copy(out[l].b, ly.Bias)
	}
	for l := 0; l < len(out)-1; l++ {
		W, norms, err := normaliseRows(fmt.Sprintf("%s layer %d", name, l), out[l].W)
		if err != nil {
			return nil, err
		}
		out[l].W = W
		for i, n := range norms {
			out[l].b[i] /= n
		}
		next := out[l+1].W
		r, _ := next.Dims()
		for k := 0; k < r; k++ {
			row := next.RawRowView(k)
			for i, n := range norms {
				row[i] *= n
			}
		}
	}
	return out, nil
}

// matchUnits returns the assignment of est's units to truth's minimising
// Σ ‖w − ŵ‖² + (b − b̂)².
func matchUnits(t, e layerParams) []int {
	m, _ := t.W.Dims()
	cost := make([][]float64, m)
	for i := range cost {
		cost[i] = make([]float64, m)
		rt := t.W.RawRowView(i)
		for j := range cost[i] {
			re := e.W.RawRowView(j)
			s := (t.b[i] - e.b[j]) * (t.b[i] - e.b[j])
			for k := range rt {
				s += (rt[k] - re[k]) * (rt[k] - re[k])
			}
			cost[i][j] = s
		}
	}
	return hungarian(cost)
}
