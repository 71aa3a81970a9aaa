package nn

import (
	"fmt"
	"math"
	"slices"
)

// The operators of Graph, in float64 on row-major values, with ONNX's
// semantics (opset 13 and later; the few earlier forms torch.onnx.export
// may write are read too).

// apply computes node n on its inputs ins (an absent optional input is the
// zero value) and returns its outputs.
func (g *Graph) apply(n *GraphNode, ins []value) ([]value, error) {
	a := ins[0]
	var y value
	var err error
	switch n.Op {
	case "Identity", "Dropout":
		y = a
	case "Relu", "Sqrt", "Erf", "Tanh":
		y = unary(n.Op, a)
	case "MatMul":
		y, err = matmul(a, ins[1])
	case "Gemm":
		y, err = gemm(n, ins)
	case "Add", "Sub", "Mul", "Div", "Pow", "Equal":
		y, err = broadcast(n.Op, a, ins[1])
	case "Where":
		y, err = where(a, ins[1], ins[2])
	case "Transpose":
		p := slices.Clone(seq(len(a.shape)))
		slices.Reverse(p)
		if at, ok := n.Attrs["perm"]; ok {
			if len(at.Ints) != len(a.shape) {
				return nil, fmt.Errorf("perm %v for a tensor of shape %v", at.Ints, a.shape)
			}
			for i, v := range at.Ints {
				p[i] = int(v)
			}
		}
		y, err = transpose(a, p)
	case "Reshape":
		var spec []int
		if spec, err = intsOf(ins[1], "shape"); err == nil {
			if n.attrInt("allowzero", 0) != 0 && slices.Contains(spec, 0) {
				return nil, fmt.Errorf("allowzero with a zero in the shape %v is not supported", spec)
			}
			y, err = reshape(a, spec)
		}
	case "Flatten":
		ax := int(n.attrInt("axis", 1))
		if ax < 0 {
			ax += len(a.shape)
		}
		if ax < 0 || ax > len(a.shape) {
			return nil, fmt.Errorf("axis %d for a tensor of shape %v", n.attrInt("axis", 1), a.shape)
		}
		y = value{shape: []int{numel(a.shape[:ax]), numel(a.shape[ax:])}, data: a.data, isInt: a.isInt}
	case "ReduceMean":
		var axes []int
		if axes, err = axesOf(n, ins, 1); err == nil {
			if len(axes) == 0 && n.attrInt("noop_with_empty_axes", 0) != 0 {
				return []value{a}, nil
			}
			y, err = reduceMean(a, axes, n.attrInt("keepdims", 1) != 0)
		}
	case "Softmax":
		axis, flat := g.softmaxAxis(n)
		y, err = softmax(a, axis, flat)
	case "LayerNormalization":
		var bias value // optional
		if len(ins) > 2 {
			bias = ins[2]
		}
		y, err = layerNorm(a, ins[1], bias, int(n.attrInt("axis", -1)), n.attrFloat("epsilon", 1e-5))
	case "Shape":
		r := len(a.shape)
		lo, hi := clampAxis(int(n.attrInt("start", 0)), r), clampAxis(int(n.attrInt("end", int64(r))), r)
		y = value{shape: []int{max(hi-lo, 0)}, isInt: true}
		for _, d := range a.shape[lo:max(hi, lo)] {
			y.data = append(y.data, float64(d))
		}
	case "Gather":
		y, err = gather(a, ins[1], int(n.attrInt("axis", 0)))
	case "Slice":
		y, err = slice(ins)
	case "Split":
		return split(n, ins)
	case "Concat":
		y, err = concat(ins, int(n.attrInt("axis", 0)))
	case "Unsqueeze", "Squeeze":
		var axes []int
		if axes, err = axesOf(n, ins, 1); err == nil {
			y, err = squeeze(n.Op == "Unsqueeze", a, axes)
		}
	case "Cast":
		y, err = cast(a, n.attrInt("to", 0))
	case "Expand":
		var shape []int
		if shape, err = intsOf(ins[1], "shape"); err == nil {
			y, err = expand(a, shape)
		}
	case "ConstantOfShape":
		y, err = constantOfShape(n, a)
	default:
		return nil, fmt.Errorf("unsupported operator")
	}
	if err != nil {
		return nil, err
	}
	return []value{y}, nil
}

// softmaxAxis returns the axis of a Softmax node and whether it normalises
// over every axis from it on (opsets before 13, whose default axis is 1).
func (g *Graph) softmaxAxis(n *GraphNode) (axis int, flat bool) {
	flat = g.Opset != 0 && g.Opset < 13
	def := int64(-1)
	if flat {
		def = 1
	}
	return int(n.attrInt("axis", def)), flat
}

// intsOf reads an integer tensor (a shape, indices, axes); values beyond
// ±2⁶² (INT64_MAX as Slice's open end) are clamped there.
func intsOf(v value, what string) ([]int, error) {
	out := make([]int, len(v.data))
	for i, x := range v.data {
		if x != math.Trunc(x) {
			return nil, fmt.Errorf("%s %v is not a list of integers", what, v.data)
		}
		out[i] = int(max(-(1 << 62), min(x, 1<<62)))
	}
	return out, nil
}

// axesOf returns the axes of node n: its "axes" attribute (opsets before
// 13 or 18) or its input k, nil when neither is given.
func axesOf(n *GraphNode, ins []value, k int) ([]int, error) {
	if at, ok := n.Attrs["axes"]; ok {
		out := make([]int, len(at.Ints))
		for i, v := range at.Ints {
			out[i] = int(v)
		}
		return out, nil
	}
	if k < len(ins) && n.Inputs[k] != "" {
		return intsOf(ins[k], "axes")
	}
	return nil, nil
}

// normAxis resolves a possibly negative axis of a rank-r tensor.
func normAxis(ax, r int) (int, error) {
	if ax < 0 {
		ax += r
	}
	if ax < 0 || ax >= r {
		return 0, fmt.Errorf("axis %d out of range for rank %d", ax, r)
	}
	return ax, nil
}

// clampAxis resolves a possibly negative bound of Shape's start and end.
func clampAxis(ax, r int) int {
	if ax < 0 {
		ax += r
	}
	return max(0, min(ax, r))
}

func unary(op string, a value) value {
	f := map[string]func(float64) float64{
		"Relu": func(v float64) float64 { return math.Max(v, 0) },
		"Sqrt": math.Sqrt, "Erf": math.Erf, "Tanh": math.Tanh,
	}[op]
	y := value{shape: a.shape, data: make([]float64, len(a.data))}
	for i, v := range a.data {
		y.data[i] = f(v)
	}
	return y
}

// matmul is numpy's matmul: the last two axes multiplied as matrices, the
// leading ones broadcast; a 1-D operand is a row (left) or column (right)
// vector.
func matmul(a, b value) (value, error) {
	as, bs := a.shape, b.shape
	if len(as) == 0 || len(bs) == 0 {
		return value{}, fmt.Errorf("shapes %v × %v: scalars do not multiply as matrices", as, bs)
	}
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != k {
		return value{}, fmt.Errorf("shapes %v × %v do not match", a.shape, b.shape)
	}
	lead, err := broadcastShape(as[:len(as)-2], bs[:len(bs)-2])
	if err != nil {
		return value{}, fmt.Errorf("shapes %v × %v: %v", a.shape, b.shape, err)
	}
	shape := append(slices.Clone(lead), m, n)
	if len(a.shape) == 1 {
		shape = slices.Delete(shape, len(shape)-2, len(shape)-1)
	}
	if len(b.shape) == 1 {
		shape = shape[:len(shape)-1]
	}
	y := value{shape: shape, data: make([]float64, numel(lead)*m*n)}
	if m == 0 || k == 0 || n == 0 || len(y.data) == 0 {
		return y, nil
	}
	if numel(bs[:len(bs)-2]) == 1 && numel(lead) == numel(as[:len(as)-2]) {
		// A product by one matrix: all rows of a at once.
		mul(y.data, a.data, false, b.data, false, len(a.data)/k, k, n)
		return y, nil
	}
	pa, pb := padShape(as[:len(as)-2], len(lead)), padShape(bs[:len(bs)-2], len(lead))
	sa, sb := bstrides(pa, lead), bstrides(pb, lead)
	idx := make([]int, len(lead))
	for o := 0; o < numel(lead); o++ {
		ia, ib := 0, 0
		for d := range idx {
			ia += idx[d] * sa[d]
			ib += idx[d] * sb[d]
		}
		mul(y.data[o*m*n:(o+1)*m*n], a.data[ia*m*k:(ia+1)*m*k], false, b.data[ib*k*n:(ib+1)*k*n], false, m, k, n)
		next(idx, lead)
	}
	return y, nil
}

// next advances the row-major multi-index idx within shape.
func next(idx, shape []int) {
	for d := len(shape) - 1; d >= 0; d-- {
		if idx[d]++; idx[d] < shape[d] {
			return
		}
		idx[d] = 0
	}
}

// gemm is alpha·op(A)·op(B) + beta·C with A and B 2-D.
func gemm(n *GraphNode, ins []value) (value, error) {
	a, b := ins[0], ins[1]
	if len(a.shape) != 2 || len(b.shape) != 2 {
		return value{}, fmt.Errorf("shapes %v × %v: Gemm needs 2-D inputs", a.shape, b.shape)
	}
	if n.attrInt("transA", 0) != 0 {
		var err error
		if a, err = transpose(a, []int{1, 0}); err != nil {
			return value{}, err
		}
	}
	tb := n.attrInt("transB", 0) != 0
	k, m := b.shape[0], b.shape[1]
	if tb {
		k, m = m, k
	}
	if a.shape[1] != k {
		return value{}, fmt.Errorf("shapes %v × %v (transB %v) do not match", a.shape, b.shape, tb)
	}
	y := matmulRows(a, b.data, b.shape[0], b.shape[1], tb, n.attrFloat("alpha", 1))
	if len(ins) > 2 && n.Inputs[2] != "" {
		c := ins[2]
		if beta := n.attrFloat("beta", 1); beta != 1 {
			c = value{shape: c.shape, data: slices.Clone(c.data)}
			for i := range c.data {
				c.data[i] *= beta
			}
		}
		return broadcast("Add", y, c)
	}
	return y, nil
}

// matmulRows multiplies the rows of a (all axes but the last flattened) by
// the r×c matrix w (its transpose if tw), times alpha.
func matmulRows(a value, w []float64, r, c int, tw bool, alpha float64) value {
	k := a.shape[len(a.shape)-1]
	rows := len(a.data) / max(k, 1)
	outC := c
	if tw {
		outC = r
	}
	y := value{shape: append(slices.Clone(a.shape[:len(a.shape)-1]), outC), data: make([]float64, rows*outC)}
	if rows == 0 || k == 0 || outC == 0 {
		return y
	}
	mul(y.data, a.data, false, w, tw, rows, k, outC)
	if alpha != 1 {
		for i := range y.data {
			y.data[i] *= alpha
		}
	}
	return y
}

// binaryOps are the elementwise binary operators; Div truncates integers.
var binaryOps = map[string]func(x, y float64) float64{
	"Add": func(x, y float64) float64 { return x + y },
	"Sub": func(x, y float64) float64 { return x - y },
	"Mul": func(x, y float64) float64 { return x * y },
	"Div": func(x, y float64) float64 { return x / y },
	"Pow": math.Pow,
	"Equal": func(x, y float64) float64 {
		if x == y {
			return 1
		}
		return 0
	},
}

// broadcast applies an elementwise binary operator with numpy
// broadcasting.
func broadcast(op string, a, b value) (value, error) {
	nd := max(len(a.shape), len(b.shape))
	as, bs := padShape(a.shape, nd), padShape(b.shape, nd)
	shape, err := broadcastShape(as, bs)
	if err != nil {
		return value{}, err
	}
	f := binaryOps[op]
	isInt := a.isInt && b.isInt
	inline := op // the operator repeated may inline
	if op == "Div" && isInt {
		f = func(x, y float64) float64 { return math.Trunc(x / y) }
		inline = ""
	}
	y := value{shape: shape, data: make([]float64, numel(shape)), isInt: isInt || op == "Equal"}
	// Fast path: b repeats over the leading axes of a (a bias), or a over b's.
	if slices.Equal(shape, as) && len(b.data) > 0 && suffixOf(bs, as) {
		repeated(inline, f, y.data, a.data, b.data, false)
		return y, nil
	}
	if slices.Equal(shape, bs) && len(a.data) > 0 && suffixOf(as, bs) {
		repeated(inline, f, y.data, b.data, a.data, true)
		return y, nil
	}
	sa, sb := bstrides(as, shape), bstrides(bs, shape)
	idx := make([]int, nd)
	for i := range y.data {
		ia, ib := 0, 0
		for k := 0; k < nd; k++ {
			ia += idx[k] * sa[k]
			ib += idx[k] * sb[k]
		}
		y.data[i] = f(a.data[ia], b.data[ib])
		next(idx, shape)
	}
	return y, nil
}

// repeated sets dst[i] = f(x[i], r[i mod len(r)]) (f(r[…], x[i]) when
// swapped), in blocks of len(r) with the arithmetic operators inlined:
// the bias adds and scalings of every layer. The operator is chosen once,
// not per block: with a scalar r (attention's 1/√d, a GELU's 0.5) a block
// is one element.
func repeated(op string, f func(x, y float64) float64, dst, x, r []float64, swapped bool) {
	if swapped && (op == "Sub" || op == "Div") {
		op = "" // not commutative: f(r, x) below
	}
	m := len(r)
	if m == 1 && (op == "Add" || op == "Mul" || op == "Sub" || op == "Div") {
		repeatedScalar(op, dst, x, r[0]) // one loop, not a block per element
		return
	}
	switch op {
	case "Add":
		for base := 0; base < len(x); base += m {
			d, xs := dst[base:base+m], x[base:base+m]
			for i, v := range xs {
				d[i] = v + r[i]
			}
		}
	case "Mul":
		for base := 0; base < len(x); base += m {
			d, xs := dst[base:base+m], x[base:base+m]
			for i, v := range xs {
				d[i] = v * r[i]
			}
		}
	case "Sub":
		for base := 0; base < len(x); base += m {
			d, xs := dst[base:base+m], x[base:base+m]
			for i, v := range xs {
				d[i] = v - r[i]
			}
		}
	case "Div":
		for base := 0; base < len(x); base += m {
			d, xs := dst[base:base+m], x[base:base+m]
			for i, v := range xs {
				d[i] = v / r[i]
			}
		}
	default:
		for base := 0; base < len(x); base += m {
			d, xs := dst[base:base+m], x[base:base+m]
			for i, v := range xs {
				if swapped {
					d[i] = f(r[i], v)
				} else {
					d[i] = f(v, r[i])
				}
			}
		}
	}
}

// repeatedScalar sets dst[i] = x[i] op r for the arithmetic operators.
func repeatedScalar(op string, dst, x []float64, r float64) {
	switch op {
	case "Add":
		for i, v := range x {
			dst[i] = v + r
		}
	case "Mul":
		for i, v := range x {
			dst[i] = v * r
		}
	case "Sub":
		for i, v := range x {
			dst[i] = v - r
		}
	case "Div":
		for i, v := range x {
			dst[i] = v / r
		}
	}
}

// where picks x where cond is non-zero, else y, all three broadcast.
func where(cond, x, y value) (value, error) {
	shape, err := broadcastShape(cond.shape, x.shape, y.shape)
	if err != nil {
		return value{}, err
	}
	nd := len(shape)
	sc, sx, sy := bstrides(padShape(cond.shape, nd), shape), bstrides(padShape(x.shape, nd), shape), bstrides(padShape(y.shape, nd), shape)
	out := value{shape: shape, data: make([]float64, numel(shape)), isInt: x.isInt && y.isInt}
	idx := make([]int, nd)
	for i := range out.data {
		ic, ix, iy := 0, 0, 0
		for k := range idx {
			ic += idx[k] * sc[k]
			ix += idx[k] * sx[k]
			iy += idx[k] * sy[k]
		}
		if cond.data[ic] != 0 {
			out.data[i] = x.data[ix]
		} else {
			out.data[i] = y.data[iy]
		}
		next(idx, shape)
	}
	return out, nil
}

// expand broadcasts a to shape (both ways, as ONNX's Expand).
func expand(a value, shape []int) (value, error) {
	for _, d := range shape {
		if d < 0 {
			return value{}, fmt.Errorf("shape %v has a negative dimension", shape)
		}
	}
	full, err := broadcastShape(a.shape, shape)
	if err != nil {
		return value{}, err
	}
	st := bstrides(padShape(a.shape, len(full)), full)
	y := value{shape: full, data: make([]float64, numel(full)), isInt: a.isInt}
	idx := make([]int, len(full))
	for i := range y.data {
		off := 0
		for k := range idx {
			off += idx[k] * st[k]
		}
		y.data[i] = a.data[off]
		next(idx, full)
	}
	return y, nil
}

// padShape left-pads s with ones to nd axes.
func padShape(s []int, nd int) []int {
	return append(slices.Repeat([]int{1}, nd-len(s)), s...)
}

// broadcastShape returns the numpy broadcast of shapes.
func broadcastShape(shapes ...[]int) ([]int, error) {
	nd := 0
	for _, s := range shapes {
		nd = max(nd, len(s))
	}
	out := slices.Repeat([]int{1}, nd)
	for _, s := range shapes {
		p := padShape(s, nd)
		for i, d := range p {
			switch {
			case d == out[i] || d == 1:
			case out[i] == 1:
				out[i] = d
			default:
				return nil, fmt.Errorf("shapes %v do not broadcast", shapes)
			}
		}
	}
	return out, nil
}

// suffixOf reports whether s (padded to full's rank) is ones followed by
// the trailing axes of full, so its values repeat with period len(s).
func suffixOf(s, full []int) bool {
	i := 0
	for i < len(s) && s[i] == 1 {
		i++
	}
	return slices.Equal(s[i:], full[i:])
}

// bstrides returns the row-major strides of shape s, 0 on broadcast axes.
func bstrides(s, out []int) []int {
	st := make([]int, len(s))
	acc := 1
	for k := len(s) - 1; k >= 0; k-- {
		if s[k] != 1 || out[k] == 1 {
			st[k] = acc
		}
		if s[k] == 1 {
			st[k] = 0
		}
		acc *= s[k]
	}
	return st
}

// transpose permutes the axes of a.
func transpose(a value, perm []int) (value, error) {
	nd := len(a.shape)
	seen := make([]bool, nd)
	if len(perm) != nd {
		return value{}, fmt.Errorf("perm %v is not a permutation of %d axes", perm, nd)
	}
	for _, p := range perm {
		if p < 0 || p >= nd || seen[p] {
			return value{}, fmt.Errorf("perm %v is not a permutation of %d axes", perm, nd)
		}
		seen[p] = true
	}
	shape := make([]int, nd)
	in := bstrides(a.shape, a.shape)
	st := make([]int, nd)
	for i, p := range perm {
		shape[i] = a.shape[p]
		st[i] = in[p]
		if a.shape[p] == 1 {
			st[i] = 0
		}
	}
	y := value{shape: shape, data: make([]float64, len(a.data)), isInt: a.isInt}
	idx := make([]int, nd)
	off := 0
	for i := range y.data {
		y.data[i] = a.data[off]
		for k := nd - 1; k >= 0; k-- {
			idx[k]++
			off += st[k]
			if idx[k] < shape[k] {
				break
			}
			off -= st[k] * idx[k]
			idx[k] = 0
		}
	}
	return y, nil
}

// reshape applies an ONNX Reshape shape (0 copies the input's dimension,
// -1 is inferred).
func reshape(a value, spec []int) (value, error) {
	shape := make([]int, len(spec))
	infer := -1
	known := 1
	for i, d := range spec {
		switch {
		case d == 0 && i < len(a.shape):
			shape[i] = a.shape[i]
		case d == -1 && infer < 0:
			infer = i
			continue
		case d > 0:
			shape[i] = d
		default:
			return value{}, fmt.Errorf("shape %v is not supported", spec)
		}
		if shape[i] > 0 && known > math.MaxInt/shape[i] {
			return value{}, fmt.Errorf("cannot reshape %v to %v", a.shape, spec)
		}
		known *= shape[i]
	}
	if infer >= 0 {
		if known <= 0 || len(a.data)%known != 0 {
			return value{}, fmt.Errorf("cannot reshape %v to %v", a.shape, spec)
		}
		shape[infer] = len(a.data) / known
	}
	if known != len(a.data) && infer < 0 || numel(shape) != len(a.data) {
		return value{}, fmt.Errorf("cannot reshape %v to %v", a.shape, spec)
	}
	return value{shape: shape, data: a.data, isInt: a.isInt}, nil
}

// reduceMean averages over axes (all of them when axes is empty).
func reduceMean(a value, axes []int, keep bool) (value, error) {
	nd := len(a.shape)
	red := make([]bool, nd)
	for _, ax := range axes {
		k, err := normAxis(ax, nd)
		if err != nil {
			return value{}, err
		}
		red[k] = true
	}
	if len(axes) == 0 {
		for k := range red {
			red[k] = true
		}
	}
	var shape, full []int
	count := 1
	for k, d := range a.shape {
		if red[k] {
			count *= d
			full = append(full, 1)
			if keep {
				shape = append(shape, 1)
			}
			continue
		}
		full = append(full, d)
		shape = append(shape, d)
	}
	y := value{shape: shape, data: make([]float64, numel(shape))}
	st := bstrides(full, a.shape)
	idx := make([]int, nd)
	for _, v := range a.data {
		o := 0
		for k := 0; k < nd; k++ {
			o += idx[k] * st[k]
		}
		y.data[o] += v
		next(idx, a.shape)
	}
	for i := range y.data {
		y.data[i] /= float64(count)
	}
	return y, nil
}

// blocks splits shape at axis into the count of blocks before it, the
// size of the axis (every axis from it on when flat) and the count of
// positions after it.
func blocks(shape []int, axis int, flat bool) (outer, size, inner int) {
	outer, size, inner = numel(shape[:axis]), shape[axis], numel(shape[axis+1:])
	if flat {
		size, inner = size*inner, 1
	}
	return outer, size, inner
}

// softmax normalises along axis (opset 13 and later), or over every axis
// from axis on (flat: opsets before 13).
func softmax(a value, axis int, flat bool) (value, error) {
	axis, err := normAxis(axis, len(a.shape))
	if err != nil {
		return value{}, err
	}
	outer, size, inner := blocks(a.shape, axis, flat)
	y := value{shape: a.shape, data: make([]float64, len(a.data))}
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			base := o*size*inner + i
			m := math.Inf(-1)
			for j := 0; j < size; j++ {
				m = math.Max(m, a.data[base+j*inner])
			}
			var s float64
			for j := 0; j < size; j++ {
				e := math.Exp(a.data[base+j*inner] - m)
				y.data[base+j*inner] = e
				s += e
			}
			for j := 0; j < size; j++ {
				y.data[base+j*inner] /= s
			}
		}
	}
	return y, nil
}

// layerNorm normalises every block of the axes from axis on to mean 0 and
// variance 1 (+ eps), then scales and shifts it (ONNX LayerNormalization).
func layerNorm(a, scale, bias value, axis int, eps float64) (value, error) {
	axis, err := normAxis(axis, len(a.shape))
	if err != nil {
		return value{}, err
	}
	_, size, _ := blocks(a.shape, axis, true)
	y := value{shape: a.shape, data: make([]float64, len(a.data))}
	for r := 0; r+size <= len(a.data) && size > 0; r += size {
		row, out := a.data[r:r+size], y.data[r:r+size]
		mu, d := meanDev(row, eps)
		for i, x := range row {
			out[i] = (x - mu) / d
		}
	}
	if y, err = broadcast("Mul", y, scale); err != nil {
		return value{}, err
	}
	if bias.data != nil {
		return broadcast("Add", y, bias)
	}
	return y, nil
}

// meanDev returns the mean of row and its deviation √(variance + eps),
// LayerNormalization's.
func meanDev(row []float64, eps float64) (mu, d float64) {
	var v float64
	for _, x := range row {
		mu += x
	}
	mu /= float64(len(row))
	for _, x := range row {
		v += (x - mu) * (x - mu)
	}
	return mu, math.Sqrt(v/float64(len(row)) + eps)
}

// gather takes the entries of a at indices along axis.
func gather(a, indices value, axis int) (value, error) {
	axis, err := normAxis(axis, len(a.shape))
	if err != nil {
		return value{}, err
	}
	idx, err := intsOf(indices, "indices")
	if err != nil {
		return value{}, err
	}
	outer, size, inner := blocks(a.shape, axis, false)
	for i, k := range idx {
		if k < 0 {
			k += size
		}
		if k < 0 || k >= size {
			return value{}, fmt.Errorf("index %d out of range for axis %d of shape %v", idx[i], axis, a.shape)
		}
		idx[i] = k
	}
	shape := append(append(slices.Clone(a.shape[:axis]), indices.shape...), a.shape[axis+1:]...)
	y := value{shape: shape, data: make([]float64, 0, outer*len(idx)*inner), isInt: a.isInt}
	for o := 0; o < outer; o++ {
		for _, k := range idx {
			y.data = append(y.data, a.data[(o*size+k)*inner:][:inner]...)
		}
	}
	return y, nil
}

// slice is ONNX's Slice: starts, ends, optional axes and steps as inputs.
func slice(ins []value) (value, error) {
	a := ins[0]
	nd := len(a.shape)
	get := func(k int, what string, def func(int) int) ([]int, error) {
		if k < len(ins) && ins[k].data != nil {
			return intsOf(ins[k], what)
		}
		out := make([]int, len(ins[1].data))
		for i := range out {
			out[i] = def(i)
		}
		return out, nil
	}
	starts, err := get(1, "starts", nil)
	if err != nil {
		return value{}, err
	}
	ends, err := get(2, "ends", nil)
	if err != nil {
		return value{}, err
	}
	axes, err := get(3, "axes", func(i int) int { return i })
	if err != nil {
		return value{}, err
	}
	steps, err := get(4, "steps", func(int) int { return 1 })
	if err != nil {
		return value{}, err
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return value{}, fmt.Errorf("starts %v, ends %v, axes %v and steps %v differ in length", starts, ends, axes, steps)
	}
	first, step, shape := make([]int, nd), slices.Repeat([]int{1}, nd), slices.Clone(a.shape)
	for i, ax := range axes {
		ax, err := normAxis(ax, nd)
		if err != nil {
			return value{}, err
		}
		d, s, e, st := a.shape[ax], starts[i], ends[i], steps[i]
		if st == 0 {
			return value{}, fmt.Errorf("step 0")
		}
		if s < 0 {
			s += d
		}
		if e < 0 {
			e += d
		}
		if st > 0 {
			s, e = max(0, min(s, d)), max(0, min(e, d))
			shape[ax] = max(0, (e-s+st-1)/st)
		} else {
			s, e = max(-1, min(s, d-1)), max(-1, min(e, d-1))
			shape[ax] = max(0, (s-e-st-1)/(-st))
		}
		first[ax], step[ax] = s, st
	}
	y := value{shape: shape, data: make([]float64, numel(shape)), isInt: a.isInt}
	in := make([]int, nd) // row-major strides
	for k, acc := nd-1, 1; k >= 0; k-- {
		in[k], acc = acc, acc*a.shape[k]
	}
	idx := make([]int, nd)
	for i := range y.data {
		off := 0
		for k := range idx {
			off += (first[k] + idx[k]*step[k]) * in[k]
		}
		y.data[i] = a.data[off]
		next(idx, shape)
	}
	return y, nil
}

// split cuts the input along axis into the parts the split input (or the
// attribute of earlier opsets) gives, or into equal parts, one per output.
func split(n *GraphNode, ins []value) ([]value, error) {
	a := ins[0]
	axis, err := normAxis(int(n.attrInt("axis", 0)), len(a.shape))
	if err != nil {
		return nil, err
	}
	var sizes []int
	switch at, ok := n.Attrs["split"]; {
	case ok:
		for _, v := range at.Ints {
			sizes = append(sizes, int(v))
		}
	case len(ins) > 1 && n.Inputs[1] != "":
		if sizes, err = intsOf(ins[1], "split"); err != nil {
			return nil, err
		}
	default:
		parts := len(n.Outputs)
		each := (a.shape[axis] + parts - 1) / parts
		for left := a.shape[axis]; left > 0; left -= each {
			sizes = append(sizes, min(each, left))
		}
	}
	total := 0
	for _, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("split %v has a negative size", sizes)
		}
		total += s
	}
	if total != a.shape[axis] || len(sizes) != len(n.Outputs) {
		return nil, fmt.Errorf("split %v of axis %d of shape %v into %d outputs", sizes, axis, a.shape, len(n.Outputs))
	}
	outer, size, inner := blocks(a.shape, axis, false)
	var ys []value
	lo := 0
	for _, s := range sizes {
		shape := slices.Clone(a.shape)
		shape[axis] = s
		y := value{shape: shape, data: make([]float64, 0, outer*s*inner), isInt: a.isInt}
		for o := 0; o < outer; o++ {
			y.data = append(y.data, a.data[(o*size+lo)*inner:(o*size+lo+s)*inner]...)
		}
		ys = append(ys, y)
		lo += s
	}
	return ys, nil
}

// concat joins the inputs along axis.
func concat(ins []value, axis int) (value, error) {
	first := ins[0]
	axis, err := normAxis(axis, len(first.shape))
	if err != nil {
		return value{}, err
	}
	shape := slices.Clone(first.shape)
	shape[axis] = 0
	isInt := true
	for _, v := range ins {
		if len(v.shape) != len(shape) {
			return value{}, fmt.Errorf("inputs of shapes %v and %v", first.shape, v.shape)
		}
		for k, d := range v.shape {
			if k != axis && d != shape[k] {
				return value{}, fmt.Errorf("inputs of shapes %v and %v", first.shape, v.shape)
			}
		}
		shape[axis] += v.shape[axis]
		isInt = isInt && v.isInt
	}
	outer := numel(shape[:axis])
	y := value{shape: shape, data: make([]float64, 0, numel(shape)), isInt: isInt}
	for o := 0; o < outer; o++ {
		for _, v := range ins {
			block := numel(v.shape[axis:])
			y.data = append(y.data, v.data[o*block:(o+1)*block]...)
		}
	}
	return y, nil
}

// squeeze inserts unit axes at axes (Unsqueeze: positions in the output)
// or removes them (Squeeze: every unit axis when axes is empty).
func squeeze(insert bool, a value, axes []int) (value, error) {
	r := len(a.shape)
	if insert {
		r += len(axes)
	}
	at := make([]bool, r)
	for _, ax := range axes {
		k, err := normAxis(ax, r)
		if err != nil || at[k] {
			return value{}, fmt.Errorf("axes %v for shape %v", axes, a.shape)
		}
		at[k] = true
	}
	var shape []int
	if insert {
		rest := a.shape
		for k := 0; k < r; k++ {
			if at[k] {
				shape = append(shape, 1)
			} else {
				shape, rest = append(shape, rest[0]), rest[1:]
			}
		}
	} else {
		for k, d := range a.shape {
			switch {
			case at[k] && d != 1:
				return value{}, fmt.Errorf("axis %d of shape %v is not 1", k, a.shape)
			case at[k] || len(axes) == 0 && d == 1:
			default:
				shape = append(shape, d)
			}
		}
	}
	return value{shape: shape, data: a.data, isInt: a.isInt}, nil
}

// cast converts to the ONNX data type to (TensorProto.DataType's codes): the floating-point types keep
// the float64 value (the graph computes in float64), the integer types
// truncate, BOOL is 0 or 1.
func cast(a value, to int64) (value, error) {
	switch to {
	case 1, 11, 10, 16: // FLOAT, DOUBLE, FLOAT16, BFLOAT16
		return value{shape: a.shape, data: a.data}, nil
	case 2, 3, 4, 5, 6, 7, 12, 13, 9: // (u)int8/16/32/64, bool
		y := value{shape: a.shape, data: make([]float64, len(a.data)), isInt: true}
		for i, v := range a.data {
			y.data[i] = math.Trunc(v)
			if to == 9 && v != 0 {
				y.data[i] = 1
			}
		}
		return y, nil
	}
	return value{}, fmt.Errorf("cast to data type %d is not supported", to)
}

// constantOfShape fills a tensor of the shape a with the one value of the
// "value" attribute (0.0 without it).
func constantOfShape(n *GraphNode, a value) (value, error) {
	shape, err := intsOf(a, "shape")
	if err != nil {
		return value{}, err
	}
	for _, d := range shape {
		if d < 0 {
			return value{}, fmt.Errorf("shape %v has a negative dimension", shape)
		}
	}
	fill, isInt := 0.0, false
	if at, ok := n.Attrs["value"]; ok {
		if at.Kind != "tensor" || at.T == nil || len(at.T.Data) != 1 {
			return value{}, fmt.Errorf("the value attribute must be a tensor of one element")
		}
		fill, isInt = at.T.Data[0], at.T.Int
	}
	y := value{shape: shape, data: make([]float64, numel(shape)), isInt: isInt}
	for i := range y.data {
		y.data[i] = fill
	}
	return y, nil
}
