package nn

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// Canonical returns a normalised copy of m that computes the same function.
// It is the project's one normalisation of results: learners return their
// networks in this form and metrics compare networks after it, so two
// networks equal up to the symmetries of ReLU units look equal.
//
// The symmetries: a hidden ReLU unit j with incoming row wⱼ (and bias bⱼ) and
// outgoing column uⱼ of the next layer can be scaled, wⱼ,bⱼ ↦ s·wⱼ,s·bⱼ and
// uⱼ ↦ uⱼ/s for any s > 0, because ReLU(s·z) = s·ReLU(z); and the units of a
// layer can be permuted together with the next layer's columns. A rectified
// power max(z, 0)^c is homogeneous of degree c, so there uⱼ ↦ uⱼ/s^c. The
// rectified exponential e^{max(z,0)} − 1 has no scaling symmetry: its rows
// keep their norms (which the function determines) and only the
// permutation is removed.
//
// The rule, for every layer with a non-identity activation that is followed
// by another layer:
//
//  1. Scale (positively homogeneous activations only, see
//     Activation.Homogeneity): each unit's incoming row [wⱼ bⱼ] (bias
//     included when the layer has one) is scaled to unit Euclidean norm s,
//     the compensating factor s^a (a the degree) going into column j of the
//     next layer. Layers are normalised first to last, since normalising
//     layer i rescales the rows of layer i+1. A unit whose incoming row is
//     zero (a dead unit) is left unscaled.
//  2. Sort: the units are ordered by decreasing Euclidean norm of their
//     column in the next layer (their weight in the output), ties broken by
//     the lexicographic order of the (normalised) incoming row [wⱼ bⱼ].
//     Sorting goes first to last as well, so that a tie in layer i+1 is
//     broken on rows whose columns are already in their final order.
//
// Layers with Act == Identity are left as they are: their only symmetry is
// an arbitrary invertible matrix, which no simple rule removes. m must be
// valid (see Validate); it is not modified.
func (m *MLP) Canonical() *MLP {
	c := m.Clone()
	last := len(c.Layers) - 1
	for i := 0; i < last; i++ {
		act := c.Layers[i].Act
		if deg, ok := act.Homogeneity(); ok && act != Identity {
			normaliseUnits(&c.Layers[i], &c.Layers[i+1], deg)
		}
	}
	for i := 0; i < last; i++ {
		if c.Layers[i].Act != Identity {
			sortUnits(&c.Layers[i], &c.Layers[i+1])
		}
	}
	return c
}

// normaliseUnits scales each unit of l to a unit incoming row, moving the
// scale s^deg into next's columns (deg is the activation's degree of
// homogeneity: 1 for the ReLU).
func normaliseUnits(l, next *Layer, deg float64) {
	k := l.Out()
	for j := 0; j < k; j++ {
		row := l.Weight.RawRowView(j)
		ss := 0.0
		for _, v := range row {
			ss += v * v
		}
		if l.Bias != nil {
			ss += l.Bias[j] * l.Bias[j]
		}
		s := math.Sqrt(ss)
		if s == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
			continue
		}
		for a := range row {
			row[a] /= s
		}
		if l.Bias != nil {
			l.Bias[j] /= s
		}
		f := s
		if deg != 1 {
			f = math.Pow(s, deg)
		}
		r, _ := next.Weight.Dims()
		for a := 0; a < r; a++ {
			next.Weight.Set(a, j, next.Weight.At(a, j)*f)
		}
	}
}

// sortUnits permutes the units of l (rows of l.Weight, entries of l.Bias,
// columns of next.Weight) by decreasing norm of next's column, ties by the
// incoming row in lexicographic order.
func sortUnits(l, next *Layer) {
	k := l.Out()
	r, _ := next.Weight.Dims()
	norms := make([]float64, k)
	for j := 0; j < k; j++ {
		ss := 0.0
		for a := 0; a < r; a++ {
			v := next.Weight.At(a, j)
			ss += v * v
		}
		norms[j] = math.Sqrt(ss)
	}
	incoming := func(j int) []float64 {
		row := append([]float64(nil), l.Weight.RawRowView(j)...)
		if l.Bias != nil {
			row = append(row, l.Bias[j])
		}
		return row
	}
	perm := make([]int, k)
	for j := range perm {
		perm[j] = j
	}
	sort.SliceStable(perm, func(a, b int) bool {
		ja, jb := perm[a], perm[b]
		if norms[ja] != norms[jb] {
			return norms[ja] > norms[jb]
		}
		ra, rb := incoming(ja), incoming(jb)
		for t := range ra {
			if ra[t] != rb[t] {
				return ra[t] < rb[t]
			}
		}
		return false
	})
	identity := true
	for j, p := range perm {
		if j != p {
			identity = false
			break
		}
	}
	if identity {
		return
	}
	W := mat.DenseCopyOf(l.Weight)
	N := mat.DenseCopyOf(next.Weight)
	var bias []float64
	if l.Bias != nil {
		bias = append([]float64(nil), l.Bias...)
	}
	for j, p := range perm {
		l.Weight.SetRow(j, W.RawRowView(p))
		if bias != nil {
			l.Bias[j] = bias[p]
		}
		for a := 0; a < r; a++ {
			next.Weight.Set(a, j, N.At(a, p))
		}
	}
}
