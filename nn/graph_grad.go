package nn

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Reverse-mode gradients of a Graph: the values of one run are recorded
// (Values), then the nodes are walked in reverse, each operator's rule
// turning the gradient of its outputs into the gradient of its inputs
// (nodeGrad). Operators that only move values (Transpose, Reshape, Gather,
// Slice, Split, Concat, Expand, Where's branches, ...) share one rule: run
// forward on the indices of their input's values, which gives, for each
// output value, the input value it came from, and add the output's
// gradient there. Integer values (shapes, indices, masks) carry no
// gradient.

// Gradient returns the gradient of a loss with respect to the constants
// wrt (each as its Data, row-major), given the values vals of a run on a
// batch (Values) and dOut, the loss's gradient with respect to that run's
// output (one row per sample, Out() columns). It is what training a
// graph's weights needs; only the nodes between wrt and the output are
// differentiated. Errors caused by the input (a name that is not a
// floating-point constant, dOut of the wrong shape) wrap ErrInput.
func (g *Graph) Gradient(vals *GraphValues, dOut *mat.Dense, wrt []string) ([][]float64, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if r, c := dOut.Dims(); r != vals.samples || c != g.Out() {
		return nil, fmt.Errorf("nn: Graph.Gradient: the output gradient is %d×%d, the run has %d samples of %d outputs: %w", r, c, vals.samples, g.Out(), ErrInput)
	}
	if err := g.checkParams("Graph.Gradient", wrt); err != nil {
		return nil, err
	}
	return g.backward(vals.env, denseData(dOut), wrt)
}

// checkParams checks that the names are floating-point constants of the
// graph; fn names the caller in the message.
func (g *Graph) checkParams(fn string, names []string) error {
	for _, name := range names {
		t, ok := g.Consts[name]
		computed := slices.ContainsFunc(g.Nodes, func(n GraphNode) bool { return slices.Contains(n.Outputs, name) })
		if !ok || t.Int || computed || name == g.Input {
			return fmt.Errorf("nn: %s: %q is not a floating-point constant of the graph: %w", fn, name, ErrInput)
		}
	}
	return nil
}

// backward is Gradient on the values env of a run, the output's gradient
// dOut (row-major) and checked constants wrt.
func (g *Graph) backward(env map[string]value, dOut []float64, wrt []string) ([][]float64, error) {
	// live: the values that depend on a constant of wrt.
	live := map[string]bool{}
	for _, name := range wrt {
		live[name] = true
	}
	for _, n := range g.Nodes {
		if slices.ContainsFunc(n.Inputs, func(s string) bool { return live[s] }) {
			for _, o := range n.Outputs {
				if v, ok := env[o]; ok && !v.isInt {
					live[o] = true
				}
			}
		}
	}
	grads := map[string][]float64{}
	if live[g.Output] {
		grads[g.Output] = dOut
	}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := &g.Nodes[i]
		gys := make([][]float64, len(n.Outputs))
		has := false
		for k, o := range n.Outputs {
			if gys[k] = grads[o]; gys[k] != nil {
				has = true
				delete(grads, o)
			}
		}
		need := make([]bool, len(n.Inputs))
		needAny := false
		for k, name := range n.Inputs {
			need[k] = name != "" && live[name]
			needAny = needAny || need[k]
		}
		if !has || !needAny {
			continue
		}
		ins, err := g.inputs(n, env)
		if err != nil {
			return nil, err
		}
		outs := make([]value, len(n.Outputs))
		for k, o := range n.Outputs {
			outs[k] = env[o]
		}
		gins, err := g.nodeGrad(n, ins, outs, gys, need)
		if err != nil {
			return nil, fmt.Errorf("nn: graph node %q (%s): gradient: %v: %w", n.Name, n.Op, err, ErrInput)
		}
		for k, gx := range gins {
			if gx == nil || !need[k] {
				continue
			}
			name := n.Inputs[k]
			if acc := grads[name]; acc != nil {
				for j, v := range gx {
					acc[j] += v
				}
			} else {
				grads[name] = gx // each rule returns new slices
			}
		}
	}
	out := make([][]float64, len(wrt))
	for j, name := range wrt {
		if out[j] = grads[name]; out[j] == nil {
			out[j] = make([]float64, len(g.Consts[name].Data))
		}
	}
	return out, nil
}

// movingOps only move values: each output value is one input value.
var movingOps = map[string]bool{
	"Identity": true, "Dropout": true, "Transpose": true, "Reshape": true, "Flatten": true,
	"Gather": true, "Slice": true, "Split": true, "Concat": true, "Unsqueeze": true, "Squeeze": true,
	"Expand": true, "Where": true, "Cast": true,
}

// nodeGrad returns the gradient of node n's inputs ins (nil where need is
// false or the input takes none) from its outputs outs and their gradients
// gys (nil: zero).
func (g *Graph) nodeGrad(n *GraphNode, ins, outs []value, gys [][]float64, need []bool) ([][]float64, error) {
	for k := range gys {
		if gys[k] == nil {
			gys[k] = make([]float64, len(outs[k].data))
		}
	}
	gy, y := gys[0], outs[0]
	gx := make([][]float64, len(ins))
	if movingOps[n.Op] {
		return gx, g.movedGrad(n, ins, gys, need, gx)
	}
	a := ins[0]
	switch n.Op {
	case "Relu", "Sqrt", "Erf", "Tanh":
		d := map[string]func(x, y float64) float64{
			"Relu": func(x, _ float64) float64 {
				if x > 0 {
					return 1
				}
				return 0
			},
			"Sqrt": func(_, y float64) float64 { return 0.5 / y },
			"Erf":  func(x, _ float64) float64 { return 2 / math.SqrtPi * math.Exp(-x*x) },
			"Tanh": func(_, y float64) float64 { return 1 - y*y },
		}[n.Op]
		gx[0] = make([]float64, len(a.data))
		for i, x := range a.data {
			gx[0][i] = gy[i] * d(x, y.data[i])
		}
	case "Add", "Sub", "Mul", "Div", "Pow":
		return gx, binaryGrad(n.Op, ins[0], ins[1], y, gy, need, gx)
	case "MatMul":
		gx[0], gx[1] = matmulGrad(ins[0], ins[1], gy, need[0], need[1])
	case "Gemm":
		return gx, gemmGrad(n, ins, gy, need, gx)
	case "Softmax":
		axis, flat := g.softmaxAxis(n)
		axis, err := normAxis(axis, len(a.shape))
		if err != nil {
			return nil, err
		}
		outer, size, inner := blocks(a.shape, axis, flat)
		gx[0] = make([]float64, len(a.data))
		for o := 0; o < outer; o++ {
			for i := 0; i < inner; i++ {
				base := o*size*inner + i
				var dot float64
				for j := 0; j < size; j++ {
					dot += gy[base+j*inner] * y.data[base+j*inner]
				}
				for j := 0; j < size; j++ {
					p := base + j*inner
					gx[0][p] = y.data[p] * (gy[p] - dot)
				}
			}
		}
	case "ReduceMean":
		// Each input value reaches the output value it was averaged into.
		full := slices.Clone(a.shape)
		if len(y.data) != len(a.data) {
			axes, err := axesOf(n, ins, 1)
			if err != nil {
				return nil, err
			}
			for _, ax := range axes {
				k, _ := normAxis(ax, len(full))
				full[k] = 1
			}
			if len(axes) == 0 {
				full = slices.Repeat([]int{1}, len(full))
			}
		}
		src, err := sourceIndex(value{shape: full}, a.shape)
		if err != nil {
			return nil, err
		}
		count := float64(len(a.data) / max(len(y.data), 1))
		gx[0] = make([]float64, len(a.data))
		for i, s := range src {
			gx[0][i] = gy[s] / count
		}
	case "LayerNormalization":
		return gx, layerNormGrad(n, ins, gy, need, gx)
	default:
		return nil, fmt.Errorf("no gradient for operator %s", n.Op)
	}
	return gx, nil
}

// movedGrad is the rule of the movingOps: the node is run on the indices
// of the values of its data inputs (each input its own range; -1 for those
// that need no gradient), so each output value names the input value it
// came from, which receives the output's gradient.
func (g *Graph) movedGrad(n *GraphNode, ins []value, gys [][]float64, need []bool, gx [][]float64) error {
	idx := slices.Clone(ins)
	base := make([]int, len(ins)+1)
	for k, v := range ins {
		base[k+1] = base[k]
		data := k == 0
		switch n.Op {
		case "Concat":
			data = true
		case "Where":
			data = k > 0
		}
		if !data {
			continue // a shape, indices or a condition
		}
		iv := value{shape: v.shape, data: make([]float64, len(v.data)), isInt: v.isInt}
		for j := range iv.data {
			iv.data[j] = -1
			if need[k] {
				iv.data[j] = float64(base[k] + j)
			}
		}
		idx[k] = iv
		if need[k] {
			base[k+1] += len(v.data)
			gx[k] = make([]float64, len(v.data))
		}
	}
	outs, err := g.apply(n, idx)
	if err != nil {
		return err
	}
	for o, out := range outs {
		for i, s := range out.data {
			if s < 0 {
				continue
			}
			k := 0
			for int(s) >= base[k+1] {
				k++
			}
			gx[k][int(s)-base[k]] += gys[o][i]
		}
	}
	return nil
}

// sourceIndex returns, for each value of a tensor of a's shape broadcast to
// shape, the index of the value of a it repeats.
func sourceIndex(a value, shape []int) ([]int, error) {
	n := numel(shape)
	if m, ok := period(a, shape); ok {
		out := make([]int, n)
		for i, j := 0, 0; i < n; i++ {
			out[i] = j
			if j++; j == m {
				j = 0
			}
		}
		return out, nil
	}
	iv := value{shape: a.shape, data: make([]float64, numel(a.shape))}
	for j := range iv.data {
		iv.data[j] = float64(j)
	}
	e, err := expand(iv, shape)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(e.data))
	for i, s := range e.data {
		out[i] = int(s)
	}
	return out, nil
}

// period reports whether a, broadcast to shape, repeats its m values over
// the leading axes (a bias, a scalar, or the whole tensor when m is the
// size of shape), and m.
func period(a value, shape []int) (int, bool) {
	m := numel(a.shape)
	full := padShape(a.shape, max(len(a.shape), len(shape)))
	return m, len(full) == len(shape) && m > 0 && suffixOf(full, shape)
}

// binaryGrad is the rule of the broadcast arithmetic y = a op b: each
// output value's gradient goes to the values of a and b it came from.
func binaryGrad(op string, a, b, y value, gy []float64, need []bool, gx [][]float64) error {
	if op == "Add" || op == "Sub" || op == "Mul" {
		ma, okA := period(a, y.shape)
		mb, okB := period(b, y.shape)
		if okA && okB {
			periodicGrad(op, a.data, b.data, ma, mb, gy, need, gx)
			return nil
		}
	}
	ia, err := sourceIndex(a, y.shape)
	if err != nil {
		return err
	}
	ib, err := sourceIndex(b, y.shape)
	if err != nil {
		return err
	}
	var da, db func(x, z, y float64) float64 // ∂y/∂a and ∂y/∂b at a = x, b = z
	switch op {
	case "Add":
		da, db = func(_, _, _ float64) float64 { return 1 }, func(_, _, _ float64) float64 { return 1 }
	case "Sub":
		da, db = func(_, _, _ float64) float64 { return 1 }, func(_, _, _ float64) float64 { return -1 }
	case "Mul":
		da, db = func(_, z, _ float64) float64 { return z }, func(x, _, _ float64) float64 { return x }
	case "Div":
		da, db = func(_, z, _ float64) float64 { return 1 / z }, func(_, z, y float64) float64 { return -y / z }
	case "Pow":
		da = func(x, z, _ float64) float64 { return z * math.Pow(x, z-1) }
		db = func(x, _, y float64) float64 { return y * math.Log(x) }
	}
	for k, d := range []func(x, z, y float64) float64{da, db} {
		if !need[k] {
			continue
		}
		gx[k] = make([]float64, len([]value{a, b}[k].data))
		dst, other, oi := ia, b.data, ib
		if k == 1 {
			dst, other, oi = ib, a.data, ia
		}
		g := gx[k]
		switch { // the common cases inlined
		case op == "Add" || op == "Sub" && k == 0:
			for i, v := range gy {
				g[dst[i]] += v
			}
		case op == "Mul":
			for i, v := range gy {
				g[dst[i]] += v * other[oi[i]]
			}
		default:
			for i, v := range gy {
				g[dst[i]] += v * d(a.data[ia[i]], b.data[ib[i]], y.data[i])
			}
		}
	}
	return nil
}

// periodicGrad is binaryGrad's rule for Add, Sub and Mul when a and b
// repeat with periods ma and mb (period): the value i of y came from
// a[i mod ma] and b[i mod mb], so no index tables are built — the bias
// adds, residual sums and scalings of every transformer block.
func periodicGrad(op string, a, b []float64, ma, mb int, gy []float64, need []bool, gx [][]float64) {
	for k, m := range []int{ma, mb} {
		if !need[k] {
			continue
		}
		g := make([]float64, m)
		gx[k] = g
		other, mo := b, mb
		if k == 1 {
			other, mo = a, ma
		}
		sign := 1.0
		if op == "Sub" && k == 1 {
			sign = -1
		}
		j, jo := 0, 0
		if op == "Mul" {
			for _, v := range gy {
				g[j] += v * other[jo]
				if j++; j == m {
					j = 0
				}
				if jo++; jo == mo {
					jo = 0
				}
			}
			continue
		}
		for _, v := range gy {
			g[j] += sign * v
			if j++; j == m {
				j = 0
			}
		}
	}
}

// matmulGrad is the rule of MatMul (numpy's matmul, leading axes
// broadcast): ∂a = ∂y·bᵀ and ∂b = aᵀ·∂y per matrix, added up where a
// matrix was broadcast.
func matmulGrad(a, b value, gy []float64, needA, needB bool) (ga, gb []float64) {
	if needA {
		ga = make([]float64, len(a.data))
	}
	if needB {
		gb = make([]float64, len(b.data))
	}
	as, bs := a.shape, b.shape
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	lead, _ := broadcastShape(as[:len(as)-2], bs[:len(bs)-2])
	if m == 0 || k == 0 || n == 0 || len(gy) == 0 {
		return ga, gb
	}
	if numel(bs[:len(bs)-2]) == 1 && numel(lead) == numel(as[:len(as)-2]) {
		// A product by one matrix: all rows of a at once.
		rows := len(a.data) / k
		if needA {
			mul(ga, gy, false, b.data, true, rows, n, k)
		}
		if needB {
			mul(gb, a.data, true, gy, false, k, rows, n)
		}
		return ga, gb
	}
	pa, pb := padShape(as[:len(as)-2], len(lead)), padShape(bs[:len(bs)-2], len(lead))
	sa, sb := bstrides(pa, lead), bstrides(pb, lead)
	idx := make([]int, len(lead))
	ta, tb := make([]float64, m*k), make([]float64, k*n)
	for o := 0; o < numel(lead); o++ {
		ia, ib := 0, 0
		for d := range idx {
			ia += idx[d] * sa[d]
			ib += idx[d] * sb[d]
		}
		g := gy[o*m*n : (o+1)*m*n]
		if needA {
			mul(ta, g, false, b.data[ib*k*n:(ib+1)*k*n], true, m, n, k)
			addTo(ga[ia*m*k:(ia+1)*m*k], ta)
		}
		if needB {
			mul(tb, a.data[ia*m*k:(ia+1)*m*k], true, g, false, k, m, n)
			addTo(gb[ib*k*n:(ib+1)*k*n], tb)
		}
		next(idx, lead)
	}
	return ga, gb
}

// addTo adds src to dst.
func addTo(dst, src []float64) {
	for i, v := range src {
		dst[i] += v
	}
}

// gemmGrad is the rule of Gemm, y = alpha·op(A)·op(B) + beta·C.
func gemmGrad(n *GraphNode, ins []value, gy []float64, need []bool, gx [][]float64) error {
	a, b := ins[0], ins[1]
	ta, tb := n.attrInt("transA", 0) != 0, n.attrInt("transB", 0) != 0
	alpha := n.attrFloat("alpha", 1)
	// op(A) is rows×inner, op(B) inner×cols, ∂op(A) = alpha·∂Y·op(B)ᵀ and
	// ∂op(B) = alpha·op(A)ᵀ·∂Y, each written in A's or B's stored layout.
	rows, inner := a.shape[0], a.shape[1]
	if ta {
		rows, inner = inner, rows
	}
	cols := b.shape[1]
	if tb {
		cols = b.shape[0]
	}
	scale := func(v []float64) {
		if alpha != 1 {
			for i := range v {
				v[i] *= alpha
			}
		}
	}
	if need[0] {
		gx[0] = make([]float64, len(a.data))
		if ta {
			mul(gx[0], b.data, tb, gy, true, inner, cols, rows)
		} else {
			mul(gx[0], gy, false, b.data, !tb, rows, cols, inner)
		}
		scale(gx[0])
	}
	if need[1] {
		gx[1] = make([]float64, len(b.data))
		if tb {
			mul(gx[1], gy, true, a.data, ta, cols, rows, inner)
		} else {
			mul(gx[1], a.data, !ta, gy, false, inner, rows, cols)
		}
		scale(gx[1])
	}
	if len(ins) > 2 && need[2] {
		c := ins[2]
		src, err := sourceIndex(c, []int{rows, cols})
		if err != nil {
			return err
		}
		beta := n.attrFloat("beta", 1)
		gx[2] = make([]float64, len(c.data))
		for i, s := range src {
			gx[2][s] += beta * gy[i]
		}
	}
	return nil
}

// layerNormGrad is the rule of LayerNormalization: with x̂ the normalised
// block and σ its deviation, ∂scale = Σ ∂y·x̂, ∂bias = Σ ∂y, and
// ∂x = (ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))/σ for ĝ = ∂y·scale.
func layerNormGrad(n *GraphNode, ins []value, gy []float64, need []bool, gx [][]float64) error {
	a, scale := ins[0], ins[1]
	axis, err := normAxis(int(n.attrInt("axis", -1)), len(a.shape))
	if err != nil {
		return err
	}
	eps := n.attrFloat("epsilon", 1e-5)
	_, size, _ := blocks(a.shape, axis, true)
	is, err := sourceIndex(scale, a.shape)
	if err != nil {
		return err
	}
	if need[0] {
		gx[0] = make([]float64, len(a.data))
	}
	if need[1] {
		gx[1] = make([]float64, len(scale.data))
	}
	var ib []int
	if len(ins) > 2 && need[2] {
		if ib, err = sourceIndex(ins[2], a.shape); err != nil {
			return err
		}
		gx[2] = make([]float64, len(ins[2].data))
	}
	xh, gh := make([]float64, size), make([]float64, size)
	for r := 0; r+size <= len(a.data) && size > 0; r += size {
		row := a.data[r : r+size]
		mu, d := meanDev(row, eps)
		inv := 1 / d
		var mg, mgx float64
		for i, x := range row {
			p := r + i
			xh[i] = (x - mu) * inv
			gh[i] = gy[p] * scale.data[is[p]]
			mg += gh[i]
			mgx += gh[i] * xh[i]
			if gx[1] != nil {
				gx[1][is[p]] += gy[p] * xh[i]
			}
			if ib != nil {
				gx[2][ib[p]] += gy[p]
			}
		}
		mg /= float64(size)
		mgx /= float64(size)
		if gx[0] != nil {
			for i := range row {
				gx[0][r+i] = (gh[i] - mg - xh[i]*mgx) * inv
			}
		}
	}
	return nil
}
