package metrics

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Fidelity compares a classifier's logits with a reference classifier's on
// the same samples, e.g. a compressed network with the one it came from.
// Agreement and LogitError measure how faithful the model is to the
// reference, which is what post-training compression optimises; the paired
// counts say whether an accuracy difference between the two is more than
// test-set noise.
type Fidelity struct {
	// Agreement is the fraction of samples whose predicted class (the first
	// largest logit, as torch.argmax) is the reference's.
	Agreement float64 `json:"agreement"`
	// LogitError is ‖Z − Z_ref‖_F / ‖Z_ref‖_F.
	LogitError float64 `json:"logit_error"`
	// With labels: OnlyModel and OnlyRef count the samples that only the
	// model, or only the reference, classifies correctly (McNemar's
	// discordant pairs), and McNemarP is the two-sided exact p-value of
	// "both are equally accurate" (McNemarExact). Zero without labels.
	OnlyModel int     `json:"only_model"`
	OnlyRef   int     `json:"only_reference"`
	McNemarP  float64 `json:"mcnemar_p"`
}

// CompareLogits compares logits z with reference logits zref (rows are
// samples, columns classes). labels, if non-nil, are the true classes and
// add the paired accuracy comparison. Errors report mismatched shapes.
func CompareLogits(z, zref *mat.Dense, labels []int) (Fidelity, error) {
	n, k := z.Dims()
	if rn, rk := zref.Dims(); rn != n || rk != k {
		return Fidelity{}, fmt.Errorf("metrics: logits are %d×%d but the reference's are %d×%d", n, k, rn, rk)
	}
	if labels != nil && len(labels) != n {
		return Fidelity{}, fmt.Errorf("metrics: %d labels for %d samples", len(labels), n)
	}
	var f Fidelity
	same := 0
	for i := 0; i < n; i++ {
		row, rrow := z.RawRowView(i)[:k], zref.RawRowView(i)[:k]
		p, q := floats.MaxIdx(row), floats.MaxIdx(rrow)
		if p == q {
			same++
		}
		if labels != nil && (p == labels[i]) != (q == labels[i]) {
			if p == labels[i] {
				f.OnlyModel++
			} else {
				f.OnlyRef++
			}
		}
	}
	if n > 0 {
		f.Agreement = float64(same) / float64(n)
	}
	f.LogitError = RelResidual(zref, z)
	if labels != nil {
		f.McNemarP = McNemarExact(f.OnlyModel, f.OnlyRef)
	}
	return f, nil
}

// McNemarExact is the two-sided exact p-value of McNemar's test for b and c
// discordant pairs: P(|B − C| ≥ |b − c|) with B ~ Binomial(b + c, ½) and
// C = b + c − B. Summed in log space, so it is accurate for any count.
func McNemarExact(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	lgN, _ := math.Lgamma(float64(n + 1))
	logTerm := func(i int) float64 {
		a, _ := math.Lgamma(float64(i + 1))
		d, _ := math.Lgamma(float64(n - i + 1))
		return lgN - a - d - float64(n)*math.Ln2
	}
	// log Σ_{i ≤ k} C(n, i)/2ⁿ, relative to its largest term (i = k).
	top := logTerm(k)
	var s float64
	for i := 0; i <= k; i++ {
		s += math.Exp(logTerm(i) - top)
	}
	return math.Min(1, 2*math.Exp(top+math.Log(s)))
}
