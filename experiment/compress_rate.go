package experiment

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/linalg"
)

// The compress-rate and compress-estimators experiments: error rates of the
// estimators of [ZS25] on synthetic layers.

// RateRun is one fit of compress-rate.
type RateRun struct {
	D1     int     `json:"d1"`
	Seed   uint64  `json:"seed"`
	MSE    float64 `json:"mse_rank_r"`
	MSELS  float64 `json:"mse_least_squares"`
	MSESVD float64 `json:"mse_svd"`
}

// RateResults is the typed content of compress-rate's results.
type RateResults struct {
	D          int       `json:"d"`
	D2         int       `json:"d2"`
	R          int       `json:"r"`
	Sigma      float64   `json:"sigma"`
	Grid       []int     `json:"grid"`
	Runs       []RateRun `json:"runs"`
	Slope      *float64  `json:"slope_rank_r"`
	SlopeLS    *float64  `json:"slope_least_squares"`
	RatioToDoF []float64 `json:"ratio_to_dof"` // median MSE / (r(d+d2−r)σ²/(d1d2)) per d1
}

// The compress-rate setting: inputs of d columns, a rank-r map to d2
// outputs, Gaussian noise σ.
const (
	rateD, rateD2, rateRank = 30, 50, 4
	rateSigma               = 0.5
)

// runCompressRate measures Theorem 3.1's rate: the error of the rank-r
// least-squares fit (Alg 2) against the number of calibration rows d1.
func runCompressRate(ctx context.Context, cfg Config) (*Report, error) {
	const d, d2, r, sigma = rateD, rateD2, rateRank, rateSigma
	grid := []int{100, 200, 400, 800, 1600, 3200, 6400}
	if cfg.Quick {
		grid = []int{100, 400, 1600}
	}
	seeds := cfg.seeds(5, 2)
	res := &RateResults{D: d, D2: d2, R: r, Sigma: sigma, Grid: grid}
	for _, d1 := range grid {
		for s := 0; s < seeds; s++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			run, err := rateTrial(d1, cfg.Seed+uint64(s))
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, run)
		}
		cfg.progress("compress-rate", len(res.Runs), len(grid)*seeds)
	}
	var lx, ly, lyl []float64
	rep := &Report{
		Title:   "Theorem 3.1: recovery error vs calibration rows (d=30, d2=50, r=4, σ=0.5)",
		Columns: []string{"d1", "rank-r LS (median MSE)", "unconstrained LS", "truncated SVD [W]_r", "r(d+d2−r)σ²/(d1d2)", "ratio"},
		Plot:    PlotSpec{XLabel: "calibration rows d1", YLabel: "‖X̌(M − M̂)‖²/(d1·d2)", LogX: true, LogY: true},
		Results: res,
	}
	sr := Series{Name: "rank-r least squares (Alg 2)"}
	sl := Series{Name: "unconstrained least squares"}
	ss := Series{Name: "truncated SVD of W"}
	sd := Series{Name: "r(d+d2−r)σ²/(d1·d2)", Dashed: true}
	for _, d1 := range grid {
		var a, b, c []float64
		for _, run := range res.Runs {
			if run.D1 == d1 {
				a, b, c = append(a, run.MSE), append(b, run.MSELS), append(c, run.MSESVD)
			}
		}
		lo, med, hi := minMedMax(a)
		dof := float64(r*(d+d2-r)) * sigma * sigma / float64(d1*d2)
		res.RatioToDoF = append(res.RatioToDoF, med/dof)
		lx, ly, lyl = append(lx, math.Log10(float64(d1))), append(ly, math.Log10(med)), append(lyl, math.Log10(median(b)))
		sr.X, sr.Y, sr.Lo, sr.Hi = append(sr.X, float64(d1)), append(sr.Y, med), append(sr.Lo, lo), append(sr.Hi, hi)
		sl.X, sl.Y = append(sl.X, float64(d1)), append(sl.Y, median(b))
		ss.X, ss.Y = append(ss.X, float64(d1)), append(ss.Y, median(c))
		sd.X, sd.Y = append(sd.X, float64(d1)), append(sd.Y, dof)
		rep.Rows = append(rep.Rows, []string{fmt.Sprint(d1), fmt.Sprintf("%.3e", med), fmt.Sprintf("%.3e", median(b)),
			fmt.Sprintf("%.3e", median(c)), fmt.Sprintf("%.3e", dof), fmt.Sprintf("%.2f", med/dof)})
	}
	res.Slope, res.SlopeLS = slope(lx, ly), slope(lx, lyl)
	rep.Series = []Series{sr, sl, ss, sd}
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("log-log slope of the rank-r error vs d1: %s (Theorem 3.1 predicts −1); unconstrained least squares: %s", fmtSlope(res.Slope), fmtSlope(res.SlopeLS)),
		"ratio = median MSE / r(d+d2−r)σ²/(d1d2), the degrees-of-freedom level (expected within a factor ≈ 1.5)",
		"truncated SVD of W does not decay: it ignores the data, so its error is the misfit between W and a rank-r map (the paper's critique of Alg 1)")
	return rep, nil
}

// rateTrial is one compress-rate trial with d1 calibration rows: an
// anisotropic X̌, the original stream X = X̌·T, Ỹ = X̌·M + noise and
// W = X⁺Ỹ (so that X·W is the projection of Ỹ on col(X̌): ε = 0 in
// Theorem 3.1), and the errors of the rank-r fit, unconstrained least
// squares and the truncated SVD of W.
func rateTrial(d1 int, seed uint64) (RateRun, error) {
	const d, d2, r, sigma = rateD, rateD2, rateRank, rateSigma
	rng := rand.New(rand.NewPCG(deriveSeed(seed, uint64(d1), 21), 1))
	xc := rateGauss(d1, d, rng)
	// Anisotropic compressed inputs and a perturbed original stream.
	for j := 0; j < d; j++ {
		sc := math.Pow(10, -float64(j)/float64(d))
		for i := 0; i < d1; i++ {
			xc.Set(i, j, xc.At(i, j)*sc)
		}
	}
	// The original stream X = X̌·T spans the same columns as X̌ but
	// differs from it (as a compressed network's inputs differ from
	// the original's), so that X·W can equal the projection of Ỹ on
	// col(X̌), all Alg 2 ever sees of Ỹ: ε = 0 in Theorem 3.1.
	tm := rateGauss(d, d, rng)
	tm.Scale(0.1, tm)
	for j := 0; j < d; j++ {
		tm.Set(j, j, tm.At(j, j)+1)
	}
	x := rateMul(xc, tm)
	m := rateMul(rateGauss(d, r, rng), rateGauss(r, d2, rng))
	g := rateGauss(d1, d2, rng)
	g.Scale(sigma, g)
	yt := rateMul(xc, m)
	yt.Add(yt, g)
	// W = X⁺Ỹ: X·W = P_X̌·Ỹ.
	w, err := linalg.LstSq(x, yt)
	if err != nil {
		return RateRun{}, err
	}
	prob := compress.Problem{W: w, X: x, Xc: xc}
	mse := func(method compress.Method, rank int) (float64, error) {
		f, err := compress.FitLayer(prob, method, compress.LayerOptions{Bias: compress.BiasKeep})
		if err != nil {
			return 0, err
		}
		var dm mat.Dense
		dm.Sub(m, f.Rank(rank).Product())
		e := mat.Norm(rateMul(xc, &dm), 2)
		return e * e / float64(d1*d2), nil
	}
	run := RateRun{D1: d1, Seed: seed}
	if run.MSE, err = mse(compress.MethodData, r); err != nil {
		return RateRun{}, err
	}
	if run.MSELS, err = mse(compress.MethodData, d); err != nil {
		return RateRun{}, err
	}
	if run.MSESVD, err = mse(compress.MethodSVD, r); err != nil {
		return RateRun{}, err
	}
	return run, nil
}

func rateGauss(r, c int, rng *rand.Rand) *mat.Dense {
	m := mat.NewDense(r, c, nil)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			m.Set(i, j, rng.NormFloat64())
		}
	}
	return m
}

func rateMul(a, b mat.Matrix) *mat.Dense {
	var c mat.Dense
	c.Mul(a, b)
	return &c
}

// EstimatorRun is one trial of compress-estimators.
type EstimatorRun struct {
	Model     string             `json:"model"` // "bounded noise (Thm 4.4)" or "ReLU (Thm 4.9)"
	Seed      uint64             `json:"seed"`
	MSE       map[string]float64 `json:"mse"`
	NucActive map[string]bool    `json:"nuclear_active"`
}

// The compress-estimators setting: calibration inputs X̌ (d1×d), a rank-r
// map (d×d2) scaled to max |Y| = α, Gaussian noise σ before the ReLU.
const (
	estD1, estD, estD2, estRank = 300, 30, 60, 2
	estAlpha, estSigma          = 1.0, 0.5
)

// runCompressEstimators compares the convex (Alg 4) and ReLU-aware (Alg 5)
// estimators with least squares on seeded instances of both noise models.
func runCompressEstimators(ctx context.Context, cfg Config) (*Report, error) {
	const d1, d, d2, r, alpha, sigma = estD1, estD, estD2, estRank, estAlpha, estSigma
	seeds := cfg.seeds(5, 2)
	var runs []EstimatorRun
	for s := 0; s < seeds; s++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		inst, err := newEstimatorInstance(cfg.Seed + uint64(s))
		if err != nil {
			return nil, err
		}
		run, err := inst.boundedNoise()
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
		run2, err := inst.reluNoise()
		if err != nil {
			return nil, err
		}
		runs = append(runs, run2)
		cfg.progress("compress-estimators", s+1, seeds)
	}
	rep := &Report{
		Title:   "Convex (Alg 4) and ReLU-aware (Alg 5) estimators vs least squares (d1=300, d=30, d2=60, rank 2, α=1; MSE per entry, median over seeds)",
		Columns: []string{"model", "estimator", "median MSE", "min", "max"},
		Plot:    PlotSpec{XLabel: "seed", YLabel: "MSE ‖Ŷ − X̌M‖²/(d1·d2)", LogY: true},
		Results: runs,
	}
	order := map[string][]string{
		"bounded noise (Thm 4.4)": {"observed Ỹ", "least squares PỸ", "Alg 4, paper τ", "Alg 4, oracle τ", "rank-r LS [PỸ]_r"},
		"ReLU (Thm 4.9)":          {"observed Z", "least squares PZ", "rank-r LS [PZ]_r", "Alg 5, no constraint", "Alg 5, paper τ", "Alg 5, oracle τ"},
	}
	for _, model := range []string{"bounded noise (Thm 4.4)", "ReLU (Thm 4.9)"} {
		for _, est := range order[model] {
			var v, xs []float64
			for i, run := range runs {
				if run.Model == model {
					v = append(v, run.MSE[est])
					xs = append(xs, float64(i/2))
				}
			}
			lo, med, hi := minMedMax(v)
			rep.Rows = append(rep.Rows, []string{model, est, fmt.Sprintf("%.4f", med), fmt.Sprintf("%.4f", lo), fmt.Sprintf("%.4f", hi)})
			if est != "observed Ỹ" && est != "observed Z" {
				rep.Series = append(rep.Series, Series{Name: model + ": " + est, X: xs, Y: v})
			}
		}
	}
	active := 0
	for _, run := range runs {
		if run.NucActive["Alg 4, paper τ"] {
			active++
		}
	}
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("with the paper's radius τ = α√(r·d1·d2) = %.1f the nuclear constraint was active in %d of %d trials (expected: usually inactive)", alpha*math.Sqrt(float64(r*d1*d2)), active, seeds),
		fmt.Sprintf("bounds at these sizes: Theorem 4.4 (β=1) %.3g, Theorem 4.9 (σ=%.1f) %.3g, Theorem 3.1 rate r(d+d2)σ²/(d1d2) %.3g — the first two are far above the trivial 4α² = 4 (vacuous)",
			compress.Thm44Bound(alpha, 1, r, d1, d2), sigma, compress.Thm49Bound(alpha, sigma, r, d1, d2), compress.Thm31Rate(r, d, d2, d1, sigma, 0)))
	return rep, nil
}

// estimatorInstance is one seed's compress-estimators instance: Gaussian
// X̌, the noiseless Y = X̌·M, the column span of X̌, the nuclear norm of Y
// (the oracle τ) and the paper's τ, and the RNG that draws the noise.
type estimatorInstance struct {
	seed          uint64
	rng           *rand.Rand
	xc, y         *mat.Dense
	sub           *compress.Subspace
	nuc, paperTau float64
}

// newEstimatorInstance draws the instance of seed.
func newEstimatorInstance(seed uint64) (*estimatorInstance, error) {
	const d1, d, d2, r, alpha = estD1, estD, estD2, estRank, estAlpha
	rng := rand.New(rand.NewPCG(deriveSeed(seed, 0, 23), 2))
	xc := rateGauss(d1, d, rng)
	y := rateMul(xc, rateMul(rateGauss(d, r, rng), rateGauss(r, d2, rng)))
	inf := 0.0
	for _, v := range y.RawMatrix().Data {
		inf = math.Max(inf, math.Abs(v))
	}
	y.Scale(alpha/inf, y)
	sub, err := compress.NewSubspace(xc)
	if err != nil {
		return nil, err
	}
	return &estimatorInstance{seed: seed, rng: rng, xc: xc, y: y, sub: sub, nuc: compress.NuclearNorm(y), paperTau: alpha * math.Sqrt(float64(r*d1*d2))}, nil
}

// mse is the mean squared error per entry of q against the noiseless Y.
func (in *estimatorInstance) mse(q *mat.Dense) float64 {
	const d1, d2 = estD1, estD2
	var dd mat.Dense
	dd.Sub(q, in.y)
	n := mat.Norm(&dd, 2)
	return n * n / (d1 * d2)
}

// boundedNoise is the Thm 4.4 model, bounded (uniform [−1, 1]) noise: the
// observations, least squares, Alg 4 with the paper's and the oracle τ,
// and the rank-r least-squares fit.
func (in *estimatorInstance) boundedNoise() (EstimatorRun, error) {
	const d1, d2, r, alpha = estD1, estD2, estRank, estAlpha
	co := compress.ConvexOptions{MaxIter: 2000, Tol: 1e-7}
	mse, xc, sub := in.mse, in.xc, in.sub
	yt := mat.DenseCopyOf(in.y)
	for i := 0; i < d1; i++ {
		for j := 0; j < d2; j++ {
			yt.Set(i, j, yt.At(i, j)+(2*in.rng.Float64()-1))
		}
	}
	run := EstimatorRun{Model: "bounded noise (Thm 4.4)", Seed: in.seed, MSE: map[string]float64{}, NucActive: map[string]bool{}}
	run.MSE["observed Ỹ"] = mse(yt)
	ls := sub.Project(yt)
	run.MSE["least squares PỸ"] = mse(ls)
	for _, c := range []struct {
		name string
		tau  float64
	}{{"Alg 4, paper τ", in.paperTau}, {"Alg 4, oracle τ", in.nuc}} {
		p, info, err := compress.ProjectPsi(yt, sub, alpha, c.tau, co)
		if err != nil && p == nil {
			return run, err
		}
		run.MSE[c.name] = mse(p)
		run.NucActive[c.name] = info.NuclearActive
	}
	f, err := compress.FitLayer(compress.Problem{W: mustLstSq(xc, yt), X: xc}, compress.MethodData, compress.LayerOptions{Bias: compress.BiasKeep})
	if err != nil {
		return run, err
	}
	run.MSE["rank-r LS [PỸ]_r"] = mse(f.Rank(r).Apply(xc))
	return run, nil
}

// reluNoise is the Thm 4.9 model, ReLU observations with Gaussian noise:
// the observations, least squares, the rank-r least-squares fit, and
// Alg 5 without constraint and with the paper's and the oracle τ.
func (in *estimatorInstance) reluNoise() (EstimatorRun, error) {
	const d1, d2, r, alpha, sigma = estD1, estD2, estRank, estAlpha, estSigma
	mse, xc, sub, y := in.mse, in.xc, in.sub, in.y
	z := mat.NewDense(d1, d2, nil)
	for i := 0; i < d1; i++ {
		for j := 0; j < d2; j++ {
			z.Set(i, j, math.Max(0, y.At(i, j)+sigma*in.rng.NormFloat64()))
		}
	}
	run2 := EstimatorRun{Model: "ReLU (Thm 4.9)", Seed: in.seed, MSE: map[string]float64{}, NucActive: map[string]bool{}}
	run2.MSE["observed Z"] = mse(z)
	run2.MSE["least squares PZ"] = mse(sub.Project(z))
	fz, err := compress.FitLayer(compress.Problem{W: mustLstSq(xc, z), X: xc}, compress.MethodData, compress.LayerOptions{Bias: compress.BiasKeep})
	if err != nil {
		return run2, err
	}
	run2.MSE["rank-r LS [PZ]_r"] = mse(fz.Rank(r).Apply(xc))
	ro := compress.ReLUOptions{MaxIter: 300, Tol: 1e-6, Constraint: compress.ConvexOptions{MaxIter: 300, Tol: 1e-6}}
	for _, c := range []struct {
		name       string
		alpha, tau float64
	}{{"Alg 5, no constraint", math.Inf(1), math.Inf(1)}, {"Alg 5, paper τ", alpha, in.paperTau}, {"Alg 5, oracle τ", alpha, in.nuc}} {
		p, _, err := compress.ReLUMLE(z, sub, sigma, c.alpha, c.tau, nil, ro)
		if err != nil && p == nil {
			return run2, err
		}
		run2.MSE[c.name] = mse(p)
	}
	return run2, nil
}

func mustLstSq(a, b *mat.Dense) *mat.Dense {
	x, err := linalg.LstSq(a, b)
	if err != nil {
		panic(err)
	}
	return x
}
