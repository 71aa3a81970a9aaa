package main

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/tensor"
)

// Limits of the residual test (diagnoseResidual): the leading rows it
// reads, the input directions whose Hermite features it tests, and the
// score above which the residual counts as structure (the z of the bias
// screen, depth2.BiasZTol).
const (
	structureRows = 50_000
	structureDirs = 24 // 325 features: within tensor.MaxResidualFeatures
	structureZTol = 8
)

// residualDiagnosis is what the residual of an answer that is not certified
// shows: noise the model cannot fit, or structure it missed.
type residualDiagnosis struct {
	// Residual is ‖Y − f(X)‖/‖Y‖ (the certificate's).
	Residual float64 `json:"residual"`
	// Z is the standardised score of the residual's correlation with the
	// inputs' Hermite features of order ≤ 2 (1, z_a, z_a·z_b − δ_ab along
	// Directions input directions) on Samples rows: at most about N(0, 1)
	// when the residual is noise independent of X, large when the model
	// missed part of the signal.
	Z          float64 `json:"z"`
	Explained  float64 `json:"explained"` // share of the residual's energy the features explain
	Directions int     `json:"directions"`
	Samples    int     `json:"samples"`
	Structured bool    `json:"structured"`
	// Text says it in words, with what to do.
	Text string `json:"text"`
}

// diagnoseResidual tests the residual Y − model(X) of an answer with the
// given number of hidden units for structure. Against each output's
// residual r and each Hermite feature h of the inputs (along all of x up to
// structureDirs inputs, else along the model's structureDirs leading
// first-layer directions, where a missed part of the signal lies), the
// score n·mean(r·h)²/(mean(r²)·mean(h²)) has mean ≤ 1 when r is noise
// independent of X (a fitted model takes a little more of it); Z
// standardises their sum as a χ² with one degree of freedom per term.
// Noise of any kind gives Z near 0 or below; data the model cannot
// represent (a deeper network) give Z in the hundreds, and so does a moment
// estimate that no least-squares fit has refined (the noisy two-layer route
// without --refine: z = 425 at 10% noise), for which unrefined names what
// fits it.
func diagnoseResidual(X, Y *mat.Dense, model *nn.MLP, units int, residual float64, unrefined string) residualDiagnosis {
	n, d := X.Dims()
	_, p := Y.Dims()
	rows := min(n, structureRows)
	Xs := X.Slice(0, rows, 0, d).(*mat.Dense)
	R := model.Forward(Xs)
	R.Sub(Y.Slice(0, rows, 0, p), R)
	Z := Xs
	if d > structureDirs {
		Z = new(mat.Dense)
		Z.Mul(Xs, leadingDirections(model.Layers[0].Weight, structureDirs))
	}
	_, q := Z.Dims()
	diag := residualDiagnosis{Residual: residual, Directions: q, Samples: rows}
	f, quad := tensor.ResidualFeatures(q, 2)
	G := mat.NewDense(f, p, nil) // Σ h·r
	hh := make([]float64, f)     // Σ h²
	const chunk = 1024
	H := mat.NewDense(chunk, f, nil)
	var part mat.Dense
	for at := 0; at < rows; at += chunk {
		b := min(chunk, rows-at)
		Hb := H.Slice(0, b, 0, f).(*mat.Dense)
		for i := 0; i < b; i++ {
			h := Hb.RawRowView(i)
			tensor.HermiteFeatures(h, Z.RawRowView(at+i), 2, quad)
			for j, v := range h {
				hh[j] += v * v
			}
		}
		part.Mul(Hb.T(), R.Slice(at, at+b, 0, p))
		G.Add(G, &part)
	}
	var score, explained, energy float64
	terms := 0
	for t := 0; t < p; t++ {
		rr := mat.Dot(R.ColView(t), R.ColView(t)) // Σ r²
		if rr == 0 {
			continue
		}
		energy += rr
		for j := 0; j < f; j++ {
			if hh[j] == 0 {
				continue
			}
			g := G.At(j, t)
			// n·mean(r·h)²/(mean(r²)·mean(h²)) = n·(Σrh)²/(Σr²·Σh²).
			score += float64(rows) * g * g / (rr * hh[j])
			explained += g * g / hh[j]
			terms++
		}
	}
	if terms > 0 {
		diag.Z = (score - float64(terms)) / math.Sqrt(2*float64(terms))
		diag.Explained = explained / energy
	}
	diag.Structured = diag.Z > structureZTol
	switch {
	case diag.Structured && unrefined != "":
		diag.Text = fmt.Sprintf("The residual (%.3g of ‖Y‖) is structure, not noise: the inputs' Hermite features of order ≤ 2 explain %.0f%% of it (z = %.0f > %d).\n"+
			"The model is a moment estimate that no least-squares fit has refined: %s.",
			diag.Residual, 100*diag.Explained, diag.Z, structureZTol, unrefined)
	case diag.Structured:
		diag.Text = fmt.Sprintf("The residual (%.3g of ‖Y‖) is structure, not noise: the inputs' Hermite features of order ≤ 2 explain %.0f%% of it (z = %.0f > %d).\n"+
			"The model, one hidden layer of %d ReLU units, misses part of the signal: the data look like a deeper network, another activation, or more units than %d samples identify.\n"+
			"relurec learns one hidden layer; for a network you can query, see relurec extract (docs/extract.md).",
			diag.Residual, 100*diag.Explained, diag.Z, structureZTol, units, n)
	default:
		diag.Text = fmt.Sprintf("The residual (%.3g of ‖Y‖) looks like noise: it does not correlate with the inputs' Hermite features of order ≤ 2 (z = %.1f ≤ %d), so noise of about that size in Y limits every model.",
			diag.Residual, diag.Z, structureZTol)
	}
	return diag
}

// leadingDirections returns the k leading right singular vectors of W
// (d×min(k, rank) orthonormal columns): the input directions a layer reads.
func leadingDirections(W *mat.Dense, k int) *mat.Dense {
	var svd mat.SVD
	_, d := W.Dims()
	if !svd.Factorize(W, mat.SVDThin) {
		// A factorisation that fails leaves the first k coordinates.
		B := mat.NewDense(d, k, nil)
		for i := 0; i < k; i++ {
			B.Set(i, i, 1)
		}
		return B
	}
	var V mat.Dense
	svd.VTo(&V)
	_, c := V.Dims()
	return mat.DenseCopyOf(V.Slice(0, d, 0, min(k, c)))
}

// errNotCertified is the error of an answer whose certificate is not met:
// the CLI exits with status 3 (exitNotCertified). It says what the answer
// found or what its residual shows (finding) and then outcome (what was
// written).
func errNotCertified(cert certify.Certificate, finding, outcome string) error {
	msg := fmt.Sprintf("answer not certified: relative residual %.3g > %.0e.\n%s", cert.Residual, cert.Tol, finding)
	if outcome != "" {
		msg += "\n" + outcome
	}
	return errs.New(msg, errs.ErrNotExact)
}

// splitWarnings returns a learner's warnings as what the user must act on
// and notes: when the certificate is met the answer is exact on the data,
// and what the learner met on the way to it (a sign it fixed later, a start
// it replaced) is a note.
func splitWarnings(met bool, warnings []string) (warn, notes []string) {
	warnings = append([]string{}, warnings...)
	if met {
		return []string{}, warnings
	}
	return warnings, nil
}

// Outcome is the part of a learner's result that its certificate decides:
// the warnings the user must act on, the notes, what the residual shows
// when the certificate is not met, and whether the model was written.
type Outcome struct {
	Warnings  []string           `json:"warnings"`
	Notes     []string           `json:"notes,omitempty"`
	Diagnosis *residualDiagnosis `json:"diagnosis,omitempty"`
	// Written reports that the model and its manifest were written: always
	// with a met certificate, otherwise only with --approximate.
	Written bool `json:"written"`
}

// judge is the outcome of a learner's answer with this certificate and
// the learner's warnings (see settle); an answer that is not certified is
// diagnosed (unrefined as for diagnoseResidual).
func judge(X, Y *mat.Dense, model *nn.MLP, units int, cert certify.Certificate, warnings []string, approximate bool, unrefined string) (Outcome, error) {
	if cert.Met {
		return settle(cert, warnings, approximate, "")
	}
	d := diagnoseResidual(X, Y, model, units, cert.Residual, unrefined)
	out, err := settle(cert, warnings, approximate, d.Text)
	out.Diagnosis = &d
	return out, err
}

// settle is the outcome of an answer with this certificate and warnings,
// for every command that certifies what it writes: a certified answer is
// written, its warnings notes; one that is not is written only when
// approximate (--approximate) is set, and returns the error of exit status
// 3 either way, saying what the answer found (finding). The error marks the
// outputs as kept (keptOutputs) when they are written.
func settle(cert certify.Certificate, warnings []string, approximate bool, finding string) (Outcome, error) {
	out := Outcome{Written: cert.Met || approximate}
	out.Warnings, out.Notes = splitWarnings(cert.Met, warnings)
	if cert.Met {
		return out, nil
	}
	if !approximate {
		return out, errNotCertified(cert, finding, "Nothing written: --approximate writes the model anyway (the exit status stays 3).")
	}
	return out, keptOutputs{errNotCertified(cert, finding, "The approximate model was written (--approximate).")}
}

// diagnosisRows is a learner's table line for the residual of an answer
// that is not certified (none when certified).
func diagnosisRows(d *residualDiagnosis) [][2]string {
	if d == nil {
		return nil
	}
	what := fmt.Sprintf("noise-like (z = %.1f ≤ %d against the inputs' Hermite features)", d.Z, structureZTol)
	if d.Structured {
		what = fmt.Sprintf("structured (z = %.0f > %d; the inputs' Hermite features explain %.0f%%)", d.Z, structureZTol, 100*d.Explained)
	}
	return [][2]string{{"residual", what}}
}

// rows are a learner's table lines for the outcome: the diagnosis, the
// warnings and notes, the time, and the model file (out, in dtype) and its
// manifest when written.
func (o *Outcome) rows(time, out, dtype, manifest string) [][2]string {
	rows := append(diagnosisRows(o.Diagnosis), warningRows(o.Warnings, o.Notes)...)
	rows = append(rows, [2]string{"time", time})
	if !o.Written {
		return append(rows, [2]string{"model", "not written: the certificate is not met (--approximate writes it)"})
	}
	return append(rows, [2]string{"model", fmt.Sprintf("%s (%s)", out, dtype)}, [2]string{"manifest", manifest})
}

// approximateHelp is the --approximate flag's help.
const approximateHelp = "write the model even when its certificate is not met (the exit status stays 3)"

// notCertifiedHelp is the learners' --help paragraph on answers that are
// not certified.
const notCertifiedHelp = `An answer whose certificate is not met (noisy outputs, or data that one
hidden layer does not explain) exits with status 3 and writes nothing; the
message says what the residual shows: noise, or structure the model missed
(a deeper network). --approximate writes the model anyway (exit status
still 3), for noisy data where an approximate model is the goal.`
