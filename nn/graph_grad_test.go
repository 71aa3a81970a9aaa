package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// gradCase is one operator node on given inputs; the gradient of its
// floating-point inputs is checked.
type gradCase struct {
	name  string
	node  GraphNode
	ins   []value
	opset int
}

func randValue(rng *rand.Rand, lo float64, shape ...int) value {
	v := value{shape: shape, data: make([]float64, numel(shape))}
	for i := range v.data {
		v.data[i] = rng.NormFloat64()
		if lo > 0 { // positive, away from zero
			v.data[i] = lo + math.Abs(v.data[i])
		}
	}
	return v
}

func intValue(shape []int, data ...float64) value {
	return value{shape: shape, data: data, isInt: true}
}

func ints(v ...int64) GraphAttr { return GraphAttr{Kind: "ints", Ints: v} }
func one(v int64) GraphAttr     { return GraphAttr{Kind: "int", I: v} }

// gradCases cover every operator with a gradient, with broadcasting and
// the attribute forms the exports use.
func gradCases(rng *rand.Rand) []gradCase {
	r := func(shape ...int) value { return randValue(rng, 0, shape...) }
	pos := func(shape ...int) value { return randValue(rng, 0.5, shape...) }
	node := func(op string, attrs map[string]GraphAttr, nin, nout int) GraphNode {
		n := GraphNode{Name: op, Op: op, Attrs: attrs}
		for k := 0; k < nin; k++ {
			n.Inputs = append(n.Inputs, string(rune('a'+k)))
		}
		for k := 0; k < nout; k++ {
			n.Outputs = append(n.Outputs, string(rune('p'+k)))
		}
		return n
	}
	cases := []gradCase{
		{name: "Relu", node: node("Relu", nil, 1, 1), ins: []value{r(2, 3, 4)}},
		{name: "Sqrt", node: node("Sqrt", nil, 1, 1), ins: []value{pos(2, 3)}},
		{name: "Erf", node: node("Erf", nil, 1, 1), ins: []value{r(2, 3)}},
		{name: "Tanh", node: node("Tanh", nil, 1, 1), ins: []value{r(2, 3)}},
		{name: "Identity", node: node("Identity", nil, 1, 1), ins: []value{r(2, 3)}},
		{name: "Dropout", node: node("Dropout", nil, 1, 1), ins: []value{r(2, 3)}},
		{name: "Cast float", node: node("Cast", map[string]GraphAttr{"to": one(1)}, 1, 1), ins: []value{r(2, 3)}},
		{name: "MatMul 3-D by 2-D", node: node("MatMul", nil, 2, 1), ins: []value{r(2, 3, 4), r(4, 5)}},
		{name: "MatMul batched", node: node("MatMul", nil, 2, 1), ins: []value{r(2, 3, 4), r(2, 4, 5)}},
		{name: "MatMul broadcast", node: node("MatMul", nil, 2, 1), ins: []value{r(2, 1, 3, 4), r(3, 4, 2)}},
		{name: "MatMul vector left", node: node("MatMul", nil, 2, 1), ins: []value{r(4), r(4, 5)}},
		{name: "MatMul vector right", node: node("MatMul", nil, 2, 1), ins: []value{r(2, 3, 4), r(4)}},
		{name: "Gemm", node: node("Gemm", nil, 3, 1), ins: []value{r(3, 4), r(4, 5), r(5)}},
		{name: "Gemm trans", node: node("Gemm", map[string]GraphAttr{"transA": one(1), "transB": one(1),
			"alpha": {Kind: "float", F: 0.7}, "beta": {Kind: "float", F: 1.3}}, 3, 1), ins: []value{r(4, 3), r(5, 4), r(3, 5)}},
		{name: "Gemm no bias", node: node("Gemm", map[string]GraphAttr{"transB": one(1)}, 2, 1), ins: []value{r(3, 4), r(5, 4)}},
		{name: "Add bias", node: node("Add", nil, 2, 1), ins: []value{r(2, 3, 4), r(4)}},
		{name: "Add both ways", node: node("Add", nil, 2, 1), ins: []value{r(3, 1), r(1, 4)}},
		{name: "Sub", node: node("Sub", nil, 2, 1), ins: []value{r(2, 3, 1), r(3, 4)}},
		{name: "Mul", node: node("Mul", nil, 2, 1), ins: []value{r(2, 3, 4), r(3, 1)}},
		{name: "Mul scalar", node: node("Mul", nil, 2, 1), ins: []value{r(), r(2, 3)}},
		{name: "Div", node: node("Div", nil, 2, 1), ins: []value{r(2, 3, 4), pos(2, 3, 1)}},
		{name: "Pow", node: node("Pow", nil, 2, 1), ins: []value{pos(2, 3), pos(1)}},
		{name: "Softmax last", node: node("Softmax", nil, 1, 1), ins: []value{r(2, 3, 4)}, opset: 17},
		{name: "Softmax axis 1", node: node("Softmax", map[string]GraphAttr{"axis": one(1)}, 1, 1), ins: []value{r(2, 3, 4)}, opset: 13},
		{name: "Softmax flat", node: node("Softmax", map[string]GraphAttr{"axis": one(1)}, 1, 1), ins: []value{r(2, 3, 4)}, opset: 11},
		{name: "ReduceMean keep", node: node("ReduceMean", map[string]GraphAttr{"axes": ints(-1)}, 1, 1), ins: []value{r(2, 3, 4)}},
		{name: "ReduceMean drop", node: node("ReduceMean", map[string]GraphAttr{"axes": ints(0, 2), "keepdims": one(0)}, 1, 1), ins: []value{r(2, 3, 4)}},
		{name: "ReduceMean axes input", node: node("ReduceMean", nil, 2, 1), ins: []value{r(2, 3, 4), intValue([]int{1}, 1)}},
		{name: "ReduceMean all", node: node("ReduceMean", nil, 1, 1), ins: []value{r(2, 3)}},
		{name: "LayerNormalization", node: node("LayerNormalization", nil, 3, 1), ins: []value{r(2, 3, 4), r(4), r(4)}},
		{name: "LayerNormalization axis 1", node: node("LayerNormalization", map[string]GraphAttr{"axis": one(1), "epsilon": {Kind: "float", F: 0.1}}, 2, 1), ins: []value{r(2, 3, 4), r(3, 4)}},
		{name: "Transpose", node: node("Transpose", map[string]GraphAttr{"perm": ints(1, 2, 0)}, 1, 1), ins: []value{r(2, 3, 4)}},
		{name: "Reshape", node: node("Reshape", nil, 2, 1), ins: []value{r(2, 3, 4), intValue([]int{2}, 0, -1)}},
		{name: "Flatten", node: node("Flatten", nil, 1, 1), ins: []value{r(2, 3, 4)}},
		{name: "Gather repeated", node: node("Gather", map[string]GraphAttr{"axis": one(1)}, 2, 1), ins: []value{r(2, 3, 4), intValue([]int{3}, 0, 2, 0)}},
		{name: "Gather scalar", node: node("Gather", nil, 2, 1), ins: []value{r(3, 4), intValue(nil, -1)}},
		{name: "Slice steps", node: node("Slice", nil, 5, 1), ins: []value{r(2, 5, 4), intValue([]int{2}, 4, 0), intValue([]int{2}, -6, 3), intValue([]int{2}, 1, 2), intValue([]int{2}, -2, 1)}},
		{name: "Split", node: node("Split", map[string]GraphAttr{"axis": one(2)}, 2, 2), ins: []value{r(2, 3, 5), intValue([]int{2}, 2, 3)}},
		{name: "Concat", node: node("Concat", map[string]GraphAttr{"axis": one(1)}, 3, 1), ins: []value{r(2, 1, 4), r(2, 3, 4), r(2, 2, 4)}},
		{name: "Unsqueeze", node: node("Unsqueeze", nil, 2, 1), ins: []value{r(2, 3), intValue([]int{1}, 1)}},
		{name: "Squeeze", node: node("Squeeze", map[string]GraphAttr{"axes": ints(1)}, 1, 1), ins: []value{r(2, 1, 3)}},
		{name: "Expand", node: node("Expand", nil, 2, 1), ins: []value{r(3, 1), intValue([]int{3}, 2, 3, 4)}},
		{name: "Where", node: node("Where", nil, 3, 1), ins: []value{intValue([]int{3, 1}, 1, 0, 1), r(3, 4), r(4)}},
	}
	return cases
}

// Every operator's gradient agrees with central differences of
// Σ r·y (r random, y its outputs) to 1e-7 relative.
func TestGraphNodeGradients(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range gradCases(rng) {
		g := &Graph{Opset: c.opset}
		outs, err := g.apply(&c.node, c.ins)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		weights := make([][]float64, len(outs))
		for o, y := range outs {
			weights[o] = randValue(rng, 0, len(y.data)).data
		}
		loss := func() float64 {
			ys, err := g.apply(&c.node, c.ins)
			if err != nil {
				t.Fatal(err)
			}
			var s float64
			for o, y := range ys {
				for i, v := range y.data {
					s += weights[o][i] * v
				}
			}
			return s
		}
		need := make([]bool, len(c.ins))
		for k, v := range c.ins {
			need[k] = !v.isInt
		}
		gys := make([][]float64, len(outs))
		for o := range outs {
			gys[o] = append([]float64(nil), weights[o]...)
		}
		gx, err := g.nodeGrad(&c.node, c.ins, outs, gys, need)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for k, v := range c.ins {
			if !need[k] {
				continue
			}
			if len(gx[k]) != len(v.data) {
				t.Fatalf("%s: input %d: %d gradient values for %d values", c.name, k, len(gx[k]), len(v.data))
			}
			for j := range v.data {
				fd := centralDiff(&v.data[j], loss)
				if d := math.Abs(fd - gx[k][j]); d > 1e-7*(1+math.Abs(fd)) {
					t.Errorf("%s: input %d value %d: gradient %.10g, central difference %.10g", c.name, k, j, gx[k][j], fd)
				}
			}
		}
	}
}

// centralDiff is (f(x+h) − f(x−h))/2h at the value *p, left unchanged.
func centralDiff(p *float64, f func() float64) float64 {
	x := *p
	h := 1e-5 * max(1, math.Abs(x))
	*p = x + h
	up := f()
	*p = x - h
	down := f()
	*p = x
	return (up - down) / (2 * h)
}

// The whole-graph gradient of Σ r·output with respect to every
// floating-point constant of more than one value (weights, biases,
// LayerNorm scales, embeddings) agrees with central differences on the
// tiny ViT exports and the residual block.
func TestGraphGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, err := dataio.ReadMatrix("testdata/vit_tiny_x.npy", "")
	if err != nil {
		t.Fatal(err)
	}
	graphs := map[string]*Graph{}
	for path := range vitFixtures {
		if graphs[path], err = LoadGraphONNX(path); err != nil {
			t.Fatal(err)
		}
	}
	graphs["residual"] = residualGraph(rng)
	for name, g := range graphs {
		xs := x
		if name == "residual" {
			xs = mat.NewDense(4, g.In(), randValue(rng, 0, 4*g.In()).data)
		}
		n, _ := xs.Dims()
		r := mat.NewDense(n, g.Out(), randValue(rng, 0, n*g.Out()).data)
		loss := func() float64 {
			return mat.Sum(mulElem(g.Forward(xs), r))
		}
		var wrt []string
		for c, tn := range g.Consts {
			if !tn.Int && len(tn.Data) > 1 {
				wrt = append(wrt, c)
			}
		}
		vals, err := g.Values(xs)
		if err != nil {
			t.Fatal(err)
		}
		grads, err := g.Gradient(vals, r, wrt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checked := 0
		for j, c := range wrt {
			data := g.Consts[c].Data
			scale := 0.0
			for _, v := range grads[j] {
				scale = math.Max(scale, math.Abs(v))
			}
			for _, i := range []int{0, len(data) / 2, len(data) - 1} {
				fd := centralDiff(&data[i], loss)
				if d := math.Abs(fd - grads[j][i]); d > 1e-6*max(scale, 1e-3) {
					t.Errorf("%s: %s[%d]: gradient %.10g, central difference %.10g", name, c, i, grads[j][i], fd)
				}
				checked++
			}
		}
		t.Logf("%s: %d constants, %d values checked", name, len(wrt), checked)
	}
}

func mulElem(a, b *mat.Dense) *mat.Dense {
	var c mat.Dense
	c.MulElem(a, b)
	return &c
}

// Gradient refuses a name that is not a floating-point constant and an
// output gradient of the wrong shape.
func TestGraphGradientInput(t *testing.T) {
	g := residualGraph(rand.New(rand.NewPCG(5, 6)))
	x := mat.NewDense(2, g.In(), nil)
	vals, err := g.Values(x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Gradient(vals, mat.NewDense(2, g.Out(), nil), []string{"b"}); err == nil {
		t.Error("a computed value as a constant: no error")
	}
	if _, err := g.Gradient(vals, mat.NewDense(3, g.Out(), nil), []string{"W1"}); err == nil {
		t.Error("a 3-row output gradient for 2 samples: no error")
	}
}
