package extract

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/nn"
)

// mlpPolishSteps caps polishNetwork's Gauss–Newton steps, and mlpCGLSIters
// the conjugate-gradient iterations of each.
const (
	mlpPolishSteps = 12
	mlpCGLSIters   = 200
)

// polishNetwork fits every layer of a deeper network to fresh standard
// Gaussian queries at once by Gauss–Newton steps (the activation pattern
// held in each), kept while they lower the relative residual: the
// precision-restoring polish of the whole network that ends a layer-by-
// layer extraction (Carlini, Jagielski, Mironov (CRYPTO 2020) restore
// precision unit by unit instead). The layers
// are found to the oracle's precision one at a time, each through the
// frames of the ones before; a coarse oracle (float32) leaves each with
// errors of 1e-4 or so that the later layers' fits absorb only inside
// their frames. The queries number refineRowsPerParam parameters per
// output value, at least 4 per hidden unit, and coverRows' for net (so
// that a weight between hidden units seldom active together is fitted
// too); the steps end when one no longer lowers the residual by a tenth.
func (r *deepRun) polishNetwork(ctx context.Context, net *nn.MLP) (*nn.MLP, error) {
	params, hid := 0, 0
	for k, l := range net.Layers {
		params += l.Out() * (l.In() + 1)
		if k < len(net.Layers)-1 {
			hid += l.Out()
		}
	}
	p := net.Out()
	n := max(refineRowsPerParam*params/p, 4*hid)
	X, Y, err := r.gaussianQueries(ctx, n, 0x85ebca6b)
	if err != nil {
		return net, err
	}
	r.diag.QueriesRefine += n
	if X, Y, err = r.withCover(ctx, net, 1, X, Y, 0x85ebca6b); err != nil {
		return net, err
	}
	best, bestRes := net, certify.RelResidual(Y, net.Forward(X))
	r.diag.RefineBefore = bestRes
	for step := 0; step < mlpPolishSteps; step++ {
		if err := ctx.Err(); err != nil {
			return best, err
		}
		cand := gaussNewtonMLP(best, X, Y)
		r.diag.RefineSteps++
		res := certify.RelResidual(Y, cand.Forward(X))
		if !(res < bestRes) {
			break
		}
		prev := bestRes
		best, bestRes = cand, res
		if res > 0.9*prev {
			break
		}
	}
	r.diag.RefineAfter = bestRes
	return best, nil
}

// mlpSystem is the Jacobian of an MLP's outputs on X with respect to all
// its parameters, its activation patterns held fixed, applied matrix-free.
type mlpSystem struct {
	net *nn.MLP
	X   *mat.Dense
	// H[l] is layer l's input (H[0] = X), D[l] its activation pattern
	// (nil for the output layer).
	H, D []*mat.Dense
	// scale holds the Jacobi preconditioner per parameter, laid out like
	// a step.
	scale mlpStep
}

// mlpStep is a step in every layer's weights and biases.
type mlpStep struct {
	W []*mat.Dense
	b [][]float64
}

// parts lists the step's weights and biases, layer by layer.
func (s mlpStep) parts() [][]float64 {
	var ps [][]float64
	for l := range s.W {
		ps = append(ps, s.W[l].RawMatrix().Data, s.b[l])
	}
	return ps
}

// mul multiplies s by m entrywise.
func (s mlpStep) mul(m mlpStep) {
	mp := m.parts()
	for k, v := range s.parts() {
		for i := range v {
			v[i] *= mp[k][i]
		}
	}
}

func newMLPStep(net *nn.MLP) mlpStep {
	var s mlpStep
	for _, l := range net.Layers {
		s.W = append(s.W, mat.NewDense(l.Out(), l.In(), nil))
		s.b = append(s.b, make([]float64, l.Out()))
	}
	return s
}

func newMLPSystem(net *nn.MLP, X *mat.Dense) *mlpSystem {
	n, _ := X.Dims()
	sys := &mlpSystem{net: net, X: X}
	h := X
	for k, l := range net.Layers {
		sys.H = append(sys.H, h)
		Z := mat.NewDense(n, l.Out(), nil)
		Z.Mul(h, l.Weight.T())
		if k == len(net.Layers)-1 {
			sys.D = append(sys.D, nil)
			break
		}
		D := mat.NewDense(n, l.Out(), nil)
		for i := 0; i < n; i++ {
			z, dd := Z.RawRowView(i), D.RawRowView(i)
			for j := range z {
				z[j] += l.Bias[j]
				if z[j] > 0 {
					dd[j] = 1
				} else {
					z[j] = 0
				}
			}
		}
		sys.D = append(sys.D, D)
		h = Z
	}
	sys.jacobi()
	return sys
}

// jacobi sets the preconditioner: 1/√ of each parameter's column norm²
// in the Jacobian, Σ_i s_l[i,j]²·H_l[i,k]² for weight (j,k) of layer l,
// with s_l[i,j]² the squared norm of the outputs' sensitivity to unit j's
// pre-activation on sample i (one backward pass per output).
func (sys *mlpSystem) jacobi() {
	n, _ := sys.X.Dims()
	L := len(sys.net.Layers)
	p := sys.net.Out()
	S2 := make([]*mat.Dense, L)
	for l, layer := range sys.net.Layers {
		S2[l] = mat.NewDense(n, layer.Out(), nil)
	}
	for o := 0; o < p; o++ {
		G := mat.NewDense(n, p, nil)
		for i := 0; i < n; i++ {
			G.Set(i, o, 1)
		}
		for l := L - 1; l >= 0; l-- {
			if sys.D[l] != nil {
				G.MulElem(G, sys.D[l])
			}
			acc := S2[l].RawMatrix().Data
			for i, v := range G.RawMatrix().Data {
				acc[i] += v * v
			}
			if l > 0 {
				var next mat.Dense
				next.Mul(G, sys.net.Layers[l].Weight)
				G = &next
			}
		}
	}
	sys.scale = newMLPStep(sys.net)
	for l := range sys.net.Layers {
		var H2 mat.Dense
		H2.MulElem(sys.H[l], sys.H[l])
		sys.scale.W[l].Mul(S2[l].T(), &H2)
		for j := range sys.scale.b[l] {
			sys.scale.b[l][j] = mat.Sum(S2[l].ColView(j))
		}
	}
	for _, v := range sys.scale.parts() {
		for i := range v {
			if v[i] > 0 {
				v[i] = 1 / math.Sqrt(v[i])
			} else {
				v[i] = 0
			}
		}
	}
}

// apply returns J·s (n × outputs): the forward pass of the step.
func (sys *mlpSystem) apply(s mlpStep) *mat.Dense {
	var dH *mat.Dense
	n, _ := sys.X.Dims()
	for l, layer := range sys.net.Layers {
		dZ := mat.NewDense(n, layer.Out(), nil)
		dZ.Mul(sys.H[l], s.W[l].T())
		if dH != nil {
			var T mat.Dense
			T.Mul(dH, layer.Weight.T())
			dZ.Add(dZ, &T)
		}
		for i := 0; i < n; i++ {
			row := dZ.RawRowView(i)
			for j := range row {
				row[j] += s.b[l][j]
			}
		}
		if sys.D[l] != nil {
			dZ.MulElem(dZ, sys.D[l])
		}
		dH = dZ
	}
	return dH
}

// adjoint returns Jᵀ·R: the backward pass of the residual.
func (sys *mlpSystem) adjoint(R *mat.Dense) mlpStep {
	s := newMLPStep(sys.net)
	G := R
	for l := len(sys.net.Layers) - 1; l >= 0; l-- {
		if sys.D[l] != nil {
			var T mat.Dense
			T.MulElem(G, sys.D[l])
			G = &T
		}
		s.W[l].Mul(G.T(), sys.H[l])
		for j := range s.b[l] {
			s.b[l][j] = mat.Sum(G.ColView(j))
		}
		if l > 0 {
			var next mat.Dense
			next.Mul(G, sys.net.Layers[l].Weight)
			G = &next
		}
	}
	return s
}

// gaussNewtonMLP returns net after one Gauss–Newton step on ‖Y − f(X)‖²_F,
// the activation patterns held fixed: the linear least-squares problem
// in every layer's (δW, δb), solved by CGLS with a Jacobi preconditioner
// (each iteration one forward and one backward pass over X).
func gaussNewtonMLP(net *nn.MLP, X, Y *mat.Dense) *nn.MLP {
	sys := newMLPSystem(net, X)
	var R mat.Dense
	R.Sub(Y, net.Forward(X))
	applyP := func(v mlpStep) *mat.Dense {
		w := newMLPStep(net)
		axpyParts(0, w, 1, v)
		w.mul(sys.scale)
		return sys.apply(w)
	}
	adjointP := func(r *mat.Dense) mlpStep {
		s := sys.adjoint(r)
		s.mul(sys.scale)
		return s
	}
	x := cgls(applyP, adjointP, func() mlpStep { return newMLPStep(net) }, &R, mlpCGLSIters, 1e-20)
	x.mul(sys.scale)
	out := &nn.MLP{}
	for l, layer := range net.Layers {
		W := mat.DenseCopyOf(layer.Weight)
		W.Add(W, x.W[l])
		b := append([]float64(nil), layer.Bias...)
		for j := range b {
			b[j] += x.b[l][j]
		}
		out.Layers = append(out.Layers, nn.Layer{Weight: W, Bias: b, Act: layer.Act})
	}
	return out
}
