package synth

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
)

// TwoLayerProblemConfig is a whole synthetic two-layer problem: the teacher,
// the input covariance, the sample count and the label noise.
type TwoLayerProblemConfig struct {
	Teacher TwoLayerConfig
	// Activation is the teacher's hidden activation; "" means nn.ReLU.
	Activation nn.Activation
	// N is the number of samples (rows of X and Y).
	N int
	// CovCond > 1 draws a random input covariance with that condition
	// number (RandomCovariance); otherwise the inputs are N(0, I).
	CovCond float64
	// Noise is the label noise.
	Noise Noise
}

// TwoLayerProblem is a teacher and its data.
type TwoLayerProblem struct {
	Teacher *nn.MLP
	X, Y    *mat.Dense
	// Sigma is the absolute noise standard deviation.
	Sigma float64
}

// DrawTwoLayerProblem draws the teacher, the input covariance (when
// CovCond > 1), X and Y from one stream seeded by seed, in that order, so the
// same seed gives the same problem to every caller (relurec gen twolayer and
// demo).
func DrawTwoLayerProblem(cfg TwoLayerProblemConfig, seed uint64) (*TwoLayerProblem, error) {
	rng := NewRand(seed)
	teacher, err := TwoLayerTeacher(cfg.Teacher, rng)
	if err != nil {
		return nil, fmt.Errorf("generating the teacher: %w", err)
	}
	if cfg.Activation != "" {
		teacher.Layers[0].Act = cfg.Activation
	}
	var cov *mat.SymDense
	if cfg.CovCond > 1 {
		cov = RandomCovariance(cfg.Teacher.D, cfg.CovCond, rng)
	}
	x, err := GaussianInputs(cfg.N, cfg.Teacher.D, cov, rng)
	if err != nil {
		return nil, fmt.Errorf("generating inputs: %w", err)
	}
	y, sigma, err := TwoLayerData(teacher, x, cfg.Noise, rng)
	if err != nil {
		return nil, fmt.Errorf("generating outputs: %w", err)
	}
	return &TwoLayerProblem{Teacher: teacher, X: x, Y: y, Sigma: sigma}, nil
}

// Lemma16Problem is data from one network of the lower-bound pair of
// [BJW19, Lemma 16].
type Lemma16Problem struct {
	TwoLayerProblem
	// A is the parameter of the network drawn from (a, or 2a for the second).
	A float64
	// Distinguishing counts the samples on which the two networks differ.
	Distinguishing int
}

// DrawLemma16Problem draws n Gaussian inputs (n×2) from a stream seeded by
// seed and labels them, noiselessly, by the first network of
// Lemma16Pair(a), or by the second when second is set.
func DrawLemma16Problem(a float64, second bool, n int, seed uint64) (*Lemma16Problem, error) {
	rng := NewRand(seed)
	n1, n2, err := Lemma16Pair(a)
	if err != nil {
		return nil, err
	}
	teacher, na := n1, a
	if second {
		teacher, na = n2, 2*a
	}
	x, err := GaussianInputs(n, 2, nil, rng)
	if err != nil {
		return nil, err
	}
	y, _, err := TwoLayerData(teacher, x, Noise{}, nil)
	if err != nil {
		return nil, err
	}
	distinct := 0
	for q := 0; q < n; q++ {
		if Lemma16Distinguishes(x.At(q, 0), x.At(q, 1), a) {
			distinct++
		}
	}
	return &Lemma16Problem{TwoLayerProblem: TwoLayerProblem{Teacher: teacher, X: x, Y: y}, A: na, Distinguishing: distinct}, nil
}

// SAT6Problem is the instance of the NP-hardness reduction [BJW19, Thm 2]
// for a planted reversible 6-SAT formula, with its witness network.
type SAT6Problem struct {
	TwoLayerProblem
	Formula  Formula
	Planted  []bool
	Instance *HardnessInstance
}

// DrawSAT6Problem draws a planted reversible 6-SAT formula
// (PlantedReversible6SAT) from a stream seeded by seed, reduces it
// (SATReduction) and builds the witness network of the planted solution.
func DrawSAT6Problem(vars, pairs int, variableAlpha bool, seed uint64) (*SAT6Problem, error) {
	rng := NewRand(seed)
	f, plant, err := PlantedReversible6SAT(vars, pairs, rng)
	if err != nil {
		return nil, err
	}
	h, err := SATReduction(f, variableAlpha)
	if err != nil {
		return nil, err
	}
	teacher, err := h.Witness(plant)
	if err != nil {
		return nil, err
	}
	return &SAT6Problem{TwoLayerProblem: TwoLayerProblem{Teacher: teacher, X: h.X, Y: h.Y}, Formula: f, Planted: plant, Instance: h}, nil
}
