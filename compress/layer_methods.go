package compress

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// The per-layer solvers behind FitLayer: the data-driven fits (Alg 2 of
// [ZS25] and its whitened routes) and the baselines SVD-LLM, ASVD, output
// PCA and input PCA.

// fitData is Alg 2 / Alg 2c.
func fitData(p Problem, o LayerOptions) (*Fit, error) {
	z, t, waug, xbar, ybar := dataTarget(p, o.Bias)
	return fitWhitened(p, o, z, t, waug, xbar, ybar)
}

// fitWhitened solves the rank-constrained least squares min ‖t − z·Z‖ for
// every rank at once: whitening, then an SVD of the whitened target.
//
// When waug is non-nil, t = z·waug exactly (X̌ = X), and the routes use it
// to avoid touching t: zᵀt = (zᵀz)·waug, Qᵀt = R·waug.
func fitWhitened(p Problem, o LayerOptions, z, t, waug *mat.Dense, xbar, ybar []float64) (*Fit, error) {
	d, d2 := p.W.Dims()
	route := chooseRoute(o.Route)
	in := whitenInput{z: z, t: t, waug: waug}
	w, err := whiten(in, route, o.Ridge)
	if err != nil {
		return nil, err
	}
	s, v, err := rightSingular(w.b0)
	if err != nil {
		return nil, err
	}
	var bv mat.Dense
	bv.Mul(w.b0, v) // = U·diag(s)
	tn := mat.Norm(t, 2)
	f := &Fit{
		S: s, Whitening: &w.Whitening, Target: tn * tn, d: d, d2: d2,
		a0: w.unwhiten(&bv), v: v, mode: o.Bias, xbar: xbar, ybar: ybar, Converged: true,
	}
	if o.Bias == BiasKeep {
		f.keepBias = cloneVec(p.Bias)
	}
	if w.warn {
		f.Warnings = append(f.Warnings, w.Note)
	}
	return f, nil
}

// fitSVDLLM is SVD-LLM's whitening, written as its paper does (Cholesky of
// the Gram matrix, SVD of the whitened weight), independently of fitData so
// that their equality is a real test.
func fitSVDLLM(p Problem, o LayerOptions) (*Fit, error) {
	d, d2 := p.W.Dims()
	h := gram(p.X)
	var c mat.Dense
	c.Mul(h, p.W)
	w, err := whiten(whitenInput{h: h, c: &c}, RouteGram, o.Ridge) // b0 = R⁻ᵀXᵀXW = R·W
	if err != nil {
		return nil, err
	}
	u, s, v, err := svdDesc(w.b0)
	if err != nil {
		return nil, err
	}
	t := preact(p.X, p.W, nil)
	tn := mat.Norm(t, 2)
	f := &Fit{S: s, Whitening: &w.Whitening, Target: tn * tn, d: d, d2: d2,
		a0: w.unwhiten(scaleCols(u, s)), v: v, mode: BiasKeep, keepBias: cloneVec(p.Bias), Converged: true}
	if w.warn {
		f.Warnings = append(f.Warnings, w.Note)
	}
	return f, nil
}

// fitSVDLLM2 is SVD-LLM V2's two-round SVD truncation (MethodSVDLLM2),
// written as [WAWSZ25] does: an eigendecomposition (the SVD of the
// symmetric XᵀX) for the whitening, an SVD of the whitened weight.
func fitSVDLLM2(p Problem) (*Fit, error) {
	d, d2 := p.W.Dims()
	var eig mat.EigenSym
	if !eig.Factorize(gram(p.X), true) {
		return nil, fmt.Errorf("compress: eigendecomposition of the calibration Gram matrix did not converge")
	}
	lam := eig.Values(nil) // ascending
	var us mat.Dense
	eig.VectorsTo(&us)
	// Keep the eigen-directions the data see, largest first.
	var keep []int
	for k := len(lam) - 1; k >= 0 && lam[k] > float64(d)*0x1p-52*lam[len(lam)-1]; k-- {
		keep = append(keep, k)
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("compress: the calibration inputs of this layer are all zero: %w", ErrInput)
	}
	// whiten = U_s·Λ^-½ (d×k) and Λ^½·U_sᵀ·W (k×d2).
	k := len(keep)
	unwhiten := mat.NewDense(d, k, nil)
	dw := mat.NewDense(k, d2, nil)
	col := make([]float64, d)
	for j, e := range keep {
		mat.Col(col, e, &us)
		sq := math.Sqrt(lam[e])
		for i, v := range col {
			unwhiten.Set(i, j, v/sq)
		}
		row := dw.RawRowView(j)
		for i, v := range col {
			floats.AddScaled(row, v*sq, p.W.RawRowView(i)[:d2])
		}
	}
	u, s, v, err := svdDesc(dw)
	if err != nil {
		return nil, err
	}
	var a0 mat.Dense
	a0.Mul(unwhiten, scaleCols(u, s))
	t := preact(p.X, p.W, nil)
	tn := mat.Norm(t, 2)
	return &Fit{S: s, Whitening: &Whitening{Route: RouteProjection, Cond: math.Sqrt(lam[keep[0]] / lam[keep[k-1]]), Rank: k, Dropped: d - k},
		Target: tn * tn, d: d, d2: d2, a0: &a0, v: v, mode: BiasKeep, keepBias: cloneVec(p.Bias), Converged: true}, nil
}

// fitASVD is ASVD's diagonal activation scaling.
func fitASVD(p Problem, o LayerOptions) (*Fit, error) {
	alpha := o.ASVDAlpha
	if alpha == 0 {
		alpha = 0.5
	}
	d, d2 := p.W.Dims()
	x := p.X
	m, _ := x.Dims()
	sc := make([]float64, d)
	for i := 0; i < m; i++ {
		for j, v := range x.RawRowView(i)[:d] {
			sc[j] += math.Abs(v)
		}
	}
	mx := 0.0
	for j := range sc {
		sc[j] = math.Pow(sc[j]/float64(m), alpha)
		mx = math.Max(mx, sc[j])
	}
	if mx == 0 {
		return nil, fmt.Errorf("compress: the calibration inputs of this layer are all zero: %w", ErrInput)
	}
	// Channels never active in the calibration data would make S singular;
	// floor them (their weights are then compressed as plain SVD would).
	for j := range sc {
		sc[j] = math.Max(sc[j], 1e-6*mx)
	}
	sw := mat.DenseCopyOf(p.W)
	for j := 0; j < d; j++ {
		floats.Scale(sc[j], sw.RawRowView(j)[:d2])
	}
	u, s, v, err := svdDesc(sw)
	if err != nil {
		return nil, err
	}
	a0 := scaleCols(u, s)
	for j := 0; j < d; j++ {
		floats.Scale(1/sc[j], a0.RawRowView(j))
	}
	sn := mat.Norm(sw, 2)
	return &Fit{S: s, Target: sn * sn, d: d, d2: d2, a0: a0, v: v, keepBias: cloneVec(p.Bias), Converged: true}, nil
}

// fitOutputPCA projects the outputs on their top principal components,
// computed on the stream the layer sees (X̌ when given).
func fitOutputPCA(p Problem) (*Fit, error) {
	d, d2 := p.W.Dims()
	xs := p.xcheck()
	y := preact(xs, p.W, p.Bias)
	mu := colMeans(y)
	yc := centered(y, mu)
	_, s, v, err := svdDesc(yc)
	if err != nil {
		return nil, err
	}
	var a0 mat.Dense
	a0.Mul(p.W, v)
	b := p.Bias
	biasFn := func(_, bb *mat.Dense) []float64 {
		// μ − V_rV_rᵀ(μ − b) with V_rᵀ = bb.
		diff := append([]float64(nil), mu...)
		if b != nil {
			floats.Sub(diff, b)
		}
		r, _ := bb.Dims()
		out := append([]float64(nil), mu...)
		for k := 0; k < r; k++ {
			row := bb.RawRowView(k)
			floats.AddScaled(out, -floats.Dot(row, diff), row)
		}
		return out
	}
	tn := mat.Norm(yc, 2)
	return &Fit{S: s, Target: tn * tn, d: d, d2: d2, a0: &a0, v: v, biasFn: biasFn, Converged: true}, nil
}

// fitInputPCA is Alg 7: project the inputs on their top-r principal
// (uncentred) directions before W.
func fitInputPCA(p Problem) (*Fit, error) {
	d, d2 := p.W.Dims()
	_, s, v, err := svdDesc(p.xcheck())
	if err != nil {
		return nil, err
	}
	k := len(s)
	// A = U_r (d×r), B = U_rᵀW (r×d2): a0 = V (d×k), "v" = (VᵀW)ᵀ = WᵀV.
	var wtv mat.Dense
	wtv.Mul(p.W.T(), v)
	f := &Fit{S: s[:k], d: d, d2: d2, a0: v, v: &wtv, keepBias: cloneVec(p.Bias), Converged: true}
	var tot float64
	for _, x := range s {
		tot += x * x
	}
	f.Target = tot
	return f, nil
}
