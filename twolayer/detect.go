package twolayer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// The route selector of Fit needs to know which of the paper's settings the
// data are in. These checks answer the two questions the rank of Y cannot:
// are the inputs Gaussian (every route except the worst-case LP assumes it),
// and is the part of Y outside its top-k span noise or sparse corruption
// (§8 of the paper, where robust PCA must clean Y first).

// gaussCheckRows caps the rows the Gaussianity test reads: at 20 000 rows a
// uniform input's excess kurtosis (−1.2) is 35 standard errors from 0, and
// the test costs O(rows·d²) however large n is.
const gaussCheckRows = 20000

// gaussZTol is the |z| above which a moment contradicts the Gaussian
// hypothesis. With about 3·(d+16) tests per check, 6 keeps the false-alarm
// rate of a truly Gaussian input below 1e-6 even at d = 1000.
const gaussZTol = 6

// GaussianCheck reports how far X is from a centred Gaussian, as the largest
// standardised deviation of a moment along a set of directions.
type GaussianCheck struct {
	// Rows is the number of samples the check read.
	Rows int `json:"rows"`
	// MaxZ is the largest |z|: mean·√n, skewness·√(n/6) or excess
	// kurtosis·√(n/24) of the whitened inputs along the coordinate axes and
	// 16 seeded random directions.
	MaxZ float64 `json:"max_z"`
	// Worst names the statistic and direction that produced MaxZ.
	Worst string `json:"worst"`
	// Gaussian reports MaxZ ≤ 6: nothing contradicts x ~ N(0, Σ).
	Gaussian bool `json:"gaussian"`
}

// CheckGaussian tests the Gaussian-input assumption of the tensor, ICA and FPT
// routes (Bakshi et al. §4–6 assume x ~ N(0, I), or N(0, Σ) after the
// whitening of Remark 3). It whitens the first min(n, 20000) rows by their
// second moment and compares the mean, skewness and excess kurtosis along the
// coordinate axes and 16 random directions with their Gaussian sampling
// errors. A non-Gaussian X sends Fit to the worst-case route. The test cannot
// see departures that keep these moments (it is a screen, not a proof), and
// with few rows it has little power; the tensor routes need many rows anyway.
func CheckGaussian(X *mat.Dense, seed uint64) (GaussianCheck, error) {
	if X == nil {
		return GaussianCheck{}, fmt.Errorf("%w: X is nil", ErrInput)
	}
	n, d := X.Dims()
	rows := min(n, gaussCheckRows)
	if rows < 8 {
		return GaussianCheck{}, fmt.Errorf("%w: the Gaussianity check needs at least 8 samples, got %d", ErrInput, n)
	}
	Xs := X.Slice(0, rows, 0, d)
	cov := mat.NewSymDense(d, nil)
	cov.SymOuterK(1/float64(rows), Xs.T())
	inv, _, err := linalg.SymInvSqrt(cov)
	if err != nil {
		return GaussianCheck{Rows: rows, MaxZ: math.Inf(1), Worst: "singular covariance (the inputs do not span R^d)"}, nil
	}
	const random = 16
	dirs := mat.NewDense(d, d+random, nil)
	for i := 0; i < d; i++ {
		dirs.Set(i, i, 1)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6A55))
	for j := d; j < d+random; j++ {
		col := randUnit(d, rng)
		for i, v := range col {
			dirs.Set(i, j, v)
		}
	}
	var W mat.Dense
	W.Mul(inv, dirs)
	// Z = Xs·W row by row (internal/kern: the bits of the GEMM), and the
	// power sums of each column taken in row order as before, from the raw
	// rows.
	nd := d + random
	Z := mat.NewDense(rows, nd, nil)
	mulRowsPar(Z, Xs.(*mat.Dense), &W)
	S1, S2, S3, S4 := make([]float64, nd), make([]float64, nd), make([]float64, nd), make([]float64, nd)
	for i := 0; i < rows; i++ {
		for j, z := range Z.RawRowView(i) {
			z2 := z * z
			S1[j] += z
			S2[j] += z2
			S3[j] += z2 * z
			S4[j] += z2 * z2
		}
	}
	chk := GaussianCheck{Rows: rows}
	nf := float64(rows)
	for j := 0; j < nd; j++ {
		s1, s2, s3, s4 := S1[j], S2[j], S3[j], S4[j]
		m1, m2 := s1/nf, s2/nf
		// Central moments about the sample mean, so a shifted input shows up
		// in the mean test only.
		c2 := m2 - m1*m1
		c3 := s3/nf - 3*m1*m2 + 2*m1*m1*m1
		c4 := s4/nf - 4*m1*s3/nf + 6*m1*m1*m2 - 3*m1*m1*m1*m1
		name := fmt.Sprintf("axis %d", j)
		if j >= d {
			name = fmt.Sprintf("random direction %d", j-d)
		}
		for _, t := range []struct {
			what string
			z    float64
		}{
			{"mean", m1 / math.Sqrt(m2) * math.Sqrt(nf)},
			{"skewness", c3 / math.Pow(c2, 1.5) * math.Sqrt(nf/6)},
			{"excess kurtosis", (c4/(c2*c2) - 3) * math.Sqrt(nf/24)},
		} {
			if a := math.Abs(t.z); a > chk.MaxZ || math.IsNaN(a) {
				chk.MaxZ = a
				chk.Worst = fmt.Sprintf("%s along %s (z = %.1f)", t.what, name, t.z)
			}
		}
	}
	chk.Gaussian = chk.MaxZ <= gaussZTol
	return chk, nil
}

// sparseOutlierZ is the size, in robust standard deviations of the residual,
// beyond which a residual entry counts as an outlier; Gaussian noise exceeds
// it with probability 1e-15, so any sizeable fraction of such entries is
// corruption, not noise.
const sparseOutlierZ = 8

// ResidualCheck describes Y's residual outside its top-k column span.
type ResidualCheck struct {
	// Rank is the k used.
	Rank int `json:"rank"`
	// RelResidual is ‖Y − Y·P·Pᵀ‖_F/‖Y‖_F with P the top-k right singular
	// vectors of Y.
	RelResidual float64 `json:"rel_residual"`
	// RobustScale is 1.4826·median|R|, the residual's standard deviation if
	// most of it is Gaussian noise.
	RobustScale float64 `json:"robust_scale"`
	// OutlierFraction is the fraction of residual entries beyond 8 robust
	// standard deviations.
	OutlierFraction float64 `json:"outlier_fraction"`
	// Sparse reports a residual dominated by a few large entries: at least
	// 0.1% of the entries (and 10 of them) are outliers and they carry most
	// of the residual's energy. That is the sparse-noise setting of §8.
	Sparse bool `json:"sparse"`
}

// CheckResidual measures whether what Y has outside its best rank-k
// approximation looks like dense noise (Gaussian, sub-Gaussian) or like
// sparse large corruptions (Bakshi et al. §8, Def 12). Large corruptions also
// tilt the top-k span, which spreads a little of them over every entry; the
// robust scale ignores that spread and the outliers still stand out. It reads
// the first min(n, 20000) rows: corruptions at random positions show up in
// any block of rows, and the cost stays O(20000·m·k).
func CheckResidual(Y *mat.Dense, k int) (ResidualCheck, error) {
	if Y == nil {
		return ResidualCheck{}, fmt.Errorf("%w: Y is nil", ErrInput)
	}
	n, m := Y.Dims()
	if k < 1 || k >= m {
		return ResidualCheck{Rank: k}, nil
	}
	n = min(n, gaussCheckRows)
	Y = Y.Slice(0, n, 0, m).(*mat.Dense)
	_, _, P, err := linalg.TopK(Y, k)
	if err != nil {
		return ResidualCheck{}, err
	}
	var YP, R mat.Dense
	YP.Mul(Y, P)
	R.Mul(&YP, P.T())
	R.Sub(Y, &R)
	raw := R.RawMatrix()
	abs := make([]float64, 0, n*m)
	total := 0.0
	for i := 0; i < n; i++ {
		for _, v := range raw.Data[i*raw.Stride : i*raw.Stride+m] {
			abs = append(abs, math.Abs(v))
			total += v * v
		}
	}
	chk := ResidualCheck{Rank: k, RelResidual: math.Sqrt(total) / mat.Norm(Y, 2)}
	if total == 0 {
		return chk, nil
	}
	mid := len(abs) / 2
	sorted := slices.Clone(abs)
	slices.Sort(sorted)
	chk.RobustScale = 1.4826 * sorted[mid]
	cut := sparseOutlierZ * chk.RobustScale
	count, energy := 0, 0.0
	for _, a := range abs {
		if a > cut {
			count++
			energy += a * a
		}
	}
	chk.OutlierFraction = float64(count) / float64(len(abs))
	chk.Sparse = count >= 10 && chk.OutlierFraction >= 1e-3 && energy >= 0.5*total
	return chk, nil
}
