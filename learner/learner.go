// Package learner is the front door of relurec's network learners. It looks
// at what the data show — Gaussian inputs or not, one output or several,
// biases or none — and sends them to the learner whose model fits:
//
//   - twolayer: Y = ReLU(X·Vᵀ)·Uᵀ, no biases, Bakshi, Jayaram, Woodruff
//     [BJW19]; any X (worst-case route), k ≤ m outputs for the moment routes.
//   - depth2: Y = A·ReLU(W·x + b) + c, biases on both layers, Awasthi, Tang,
//     Vijayaraghavan [ATV21]; Gaussian X, any number of outputs.
//
// A PyTorch nn.Sequential(nn.Linear(d, k), nn.ReLU(), nn.Linear(k, m)) has
// biases by default, so its data go to depth2; a bias-free network with
// several outputs goes to twolayer, which is faster on it. Choice records
// the checks and the reason, and Fit tries the other learner when the first
// one's certificate fails and the other can apply.
package learner

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/twolayer"
)

// Name names a learner.
type Name string

// The learners behind the front door.
const (
	TwoLayer Name = "twolayer"
	Depth2   Name = "depth2"
)

// Options are the front door's options: the two-layer learner's, which
// Fit passes to twolayer.Fit unchanged but for the Gaussian check and the
// bias screen it adds (twolayer.Options.Gaussian, Screen). Hidden, CertTol
// (0 = each learner's default, 1e-10), Seed and Progress are the depth-2
// learner's too. The front door may only switch learners when Route is
// auto (or empty) and the activation is ReLU: a named route or another
// activation is a request for the two-layer learner.
type Options struct {
	twolayer.Options
}

// free reports whether the options leave the choice of learner open.
func (o Options) free() bool {
	return (o.Route == "" || o.Route == twolayer.UseAuto) && (o.Activation == "" || o.Activation == nn.ReLU)
}

// Choice is the front door's route-selection record: the checks it made,
// the learner it chose and why, and the learners it tried before.
type Choice struct {
	Learner Name   `json:"learner"`
	Reason  string `json:"reason"`
	// Gaussian is the Gaussian-input screen of X (twolayer.CheckGaussian).
	Gaussian *twolayer.GaussianCheck `json:"gaussian,omitempty"`
	// Bias is the bias screen (depth2.TestBiases), run when X looks
	// Gaussian, there are several outputs and n ≥ 1000, except in Fit when
	// the two-layer learner's exact route certified first (nil then).
	Bias *depth2.BiasTest `json:"bias_test,omitempty"`
	// Considered lists, in order, the checks and what each decided.
	Considered []string `json:"considered"`
	// Tried lists the learners whose certificate failed before Learner.
	Tried []Attempt `json:"tried,omitempty"`
}

// Attempt is a learner run whose answer the front door did not keep.
type Attempt struct {
	Learner  Name    `json:"learner"`
	Residual float64 `json:"residual"`
	Reason   string  `json:"reason"`
}

// Result is the answer of the learner Fit kept: exactly one of TwoLayer and
// Depth2 is set.
type Result struct {
	Choice   Choice
	TwoLayer *twolayer.Result
	Depth2   *depth2.Result
}

// Model is the learned network as an MLP (depth2's affine term, if any,
// as pairs of units).
func (r *Result) Model() *nn.MLP {
	if r.Depth2 != nil {
		return r.Depth2.Model.MLP()
	}
	return r.TwoLayer.Model
}

// Certificate is the kept learner's residual certificate.
func (r *Result) Certificate() certify.Certificate {
	if r.Depth2 != nil {
		return r.Depth2.Certificate
	}
	return r.TwoLayer.Certificate
}

// SetCertificate replaces the kept learner's certificate, for a caller
// that certifies the answer on more rows than it was fitted to (package
// outofcore).
func (r *Result) SetCertificate(c certify.Certificate) {
	if r.Depth2 != nil {
		r.Depth2.Certificate = c
		return
	}
	r.TwoLayer.Certificate = c
}

// minBiasSamples is the fewest samples the bias screen is run on; below it
// the data are too few for depth2's order-4 moments anyway.
const minBiasSamples = 1000

// Choose decides which learner the data call for, without fitting:
//
//  1. X not Gaussian → twolayer (its worst-case route takes any X; depth2
//     needs Gaussian inputs).
//  2. One output → depth2 (twolayer's moment routes need k ≤ m, so one
//     output allows one unit; depth2 reads the width from the order-2
//     moment).
//  3. Biases detected (depth2.TestBiases) → depth2.
//  4. Otherwise twolayer.
//
// Fit makes the same choice, but takes step 3 only when the two-layer
// learner's exact route from the parity start has not already certified
// the data (a bias-free network that reproduces Y exactly leaves no
// biases to find).
func Choose(X, Y *mat.Dense, opt Options) (Choice, error) {
	ch, biasScreen, err := choose(X, Y, opt)
	if err != nil || !biasScreen {
		return ch, err
	}
	if err := screenBiases(X, Y, &ch); err != nil {
		return Choice{}, err
	}
	return ch, nil
}

// choose takes Choose's steps 1–2; biasScreen reports that the choice
// waits for step 3 (screenBiases), with ch.Learner set to twolayer and no
// Reason yet.
func choose(X, Y *mat.Dense, opt Options) (ch Choice, biasScreen bool, err error) {
	n, _, m, err := certify.CheckXY(X, Y)
	if err != nil {
		return Choice{}, false, err
	}
	if !opt.free() {
		return Choice{Learner: TwoLayer, Reason: "the two-layer learner was requested (a named route or a non-ReLU activation)"}, false, nil
	}
	g, err := twolayer.CheckGaussian(X, opt.Seed)
	if err != nil {
		return Choice{}, false, err
	}
	ch.Gaussian = &g
	if !g.Gaussian {
		ch.Considered = append(ch.Considered, fmt.Sprintf("inputs: not Gaussian (%s, |z| = %.1f) → twolayer, whose worst-case route takes any X (depth2 needs x ~ N(0, I))", g.Worst, g.MaxZ))
		ch.Learner, ch.Reason = TwoLayer, "X is not Gaussian: only the two-layer learner's worst-case route applies (no biases)"
		return ch, false, nil
	}
	ch.Considered = append(ch.Considered, "inputs: consistent with x ~ N(0, I)")
	if m == 1 {
		ch.Considered = append(ch.Considered, "outputs: one → depth2 (the two-layer moment routes need as many outputs as units)")
		ch.Learner, ch.Reason = Depth2, "one output: the depth-2 learner reads the width from the order-2 moment and learns biases"
		return ch, false, nil
	}
	if n < minBiasSamples {
		ch.Considered = append(ch.Considered, fmt.Sprintf("biases: not tested (n = %d < %d)", n, minBiasSamples))
		ch.Learner, ch.Reason = TwoLayer, "few samples: the two-layer learner (no biases)"
		return ch, false, nil
	}
	ch.Learner = TwoLayer
	return ch, true, nil
}

// screenBiases is Choose's step 3: depth2.TestBiases, recorded in ch, which
// it sends to depth2 when biases show.
func screenBiases(X, Y *mat.Dense, ch *Choice) error {
	bt, err := depth2.TestBiases(X, Y)
	if err != nil {
		return err
	}
	ch.Bias = &bt
	if bt.Biased {
		ch.Considered = append(ch.Considered, fmt.Sprintf("biases: detected (output z %.1f, odd-moment z %.1f > %d) → depth2", bt.OutputZ, bt.OddZ, depth2.BiasZTol))
		ch.Learner, ch.Reason = Depth2, fmt.Sprintf("the data show biases (z = %.1f > %d): the depth-2 learner fits y = A·ReLU(W·x + b) + c", max(bt.OutputZ, bt.OddZ), depth2.BiasZTol)
		return nil
	}
	ch.Considered = append(ch.Considered, fmt.Sprintf("biases: none seen (output z %.1f, odd-moment z %.1f ≤ %d) → twolayer", bt.OutputZ, bt.OddZ, depth2.BiasZTol))
	ch.Reason = "no biases seen and several outputs: the two-layer learner"
	return nil
}

// errBiased stops the two-layer learner when the bias screen, run inside
// its route choice (twolayer.Options.Screen), sends the data to depth2.
// It never reaches Fit's caller.
var errBiased = errs.New("learner: the bias screen chose depth2", nil)

// Fit chooses a learner as Choose does and runs it. Where Choose takes
// step 3, Fit first runs the two learners' exact routes, inside the
// two-layer learner's route choice (twolayer.Options.Screen): the
// two-layer exact route from the parity start, then, when it does not
// certify, depth2's exact route (depth2.RouteSteinOnly: the Stein start
// polished on the augmented input). The first that certifies decides the
// learner: exact data leave no biases to screen for, and the screen (at
// 100-20-50 as costly as the exact route) runs only when neither does.
// When the outputs' first 2·10⁴ rows already show an output bias
// (depth2.OutputBiasZ above depth2.BiasZTol, one pass over those rows),
// depth2's exact route runs first and the two-layer learner not at all if
// it certifies: PyTorch's default nn.Linear has one. When the two-layer learner
// was chosen freely on Gaussian inputs and its certificate fails, the
// depth-2 learner is tried too (biases too small for the screen, or one
// output per unit), and its answer kept if certified; the Choice says so.
func Fit(ctx context.Context, X, Y *mat.Dense, opt Options) (*Result, error) {
	ch, biasScreen, err := choose(X, Y, opt)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	// Output biases plain at a glance: depth2's exact route before the
	// two-layer learner's, which cannot fit them.
	d2First := biasScreen && depth2Exact(opt) && depth2.OutputBiasZ(X, Y, biasGlanceRows) > depth2.BiasZTol
	if d2First {
		ok, err := exactDepth2(ctx, X, Y, opt, &ch, res, fmt.Sprintf("plain in the outputs' first %d rows", min(X.RawMatrix().Rows, biasGlanceRows)))
		if err != nil || ok {
			res.Choice = ch
			return res, err
		}
	}
	if ch.Learner == TwoLayer {
		o := opt
		screenPending := biasScreen
		if biasScreen {
			callers := o.Screen
			o.Screen = func() error {
				screenPending = false
				if depth2Exact(opt) && !d2First {
					ok, err := exactDepth2(ctx, X, Y, opt, &ch, res, "not tested, after the bias-free exact route did not certify")
					if err != nil {
						return err
					}
					if ok {
						return errBiased
					}
				}
				if err := screenBiases(X, Y, &ch); err != nil {
					return err
				}
				if ch.Learner == Depth2 {
					return errBiased
				}
				if callers != nil {
					return callers()
				}
				return nil
			}
		}
		res.TwoLayer, err = fitTwoLayer(ctx, X, Y, o, ch.Gaussian)
		switch {
		case screenPending && err == nil && res.TwoLayer.Certificate.Met:
			ch.Considered = append(ch.Considered, "biases: not tested (the bias-free exact route certified the data first)")
			ch.Reason = "a bias-free two-layer network reproduces Y exactly (its exact route certified before any screen): the two-layer learner"
		case screenPending:
			ch.Considered = append(ch.Considered, "biases: not tested (the two-layer learner stopped first)")
		case errors.Is(err, errBiased):
			res.TwoLayer, err = nil, nil
		}
	}
	res.Choice = ch
	if ch.Learner == Depth2 {
		if res.Depth2 == nil {
			res.Depth2, err = fitDepth2(ctx, X, Y, opt, depth2.RouteAuto)
		}
		return res, err
	}
	if err != nil && !errors.Is(err, errs.ErrNotExact) || err == nil && res.TwoLayer.Certificate.Met {
		return res, err
	}
	if !opt.free() || ch.Gaussian == nil || !ch.Gaussian.Gaussian {
		return res, err
	}
	first := Attempt{Learner: TwoLayer, Reason: fmt.Sprint(err)}
	if err == nil {
		first.Residual, first.Reason = res.TwoLayer.Certificate.Residual, res.TwoLayer.Reason
	}
	d2, err2 := fitDepth2(ctx, X, Y, opt, depth2.RouteAuto)
	if err2 != nil || !d2.Certificate.Met {
		// Keep the first answer; say what the other learner found.
		why := fmt.Sprint(err2)
		if err2 == nil {
			why = fmt.Sprintf("certificate not met either (residual %.2e)", d2.Certificate.Residual)
		}
		res.Choice.Considered = append(res.Choice.Considered, "fallback: depth2 tried after the two-layer certificate failed: "+why)
		return res, err
	}
	res.Choice.Tried = append(res.Choice.Tried, first)
	res.Choice.Considered = append(res.Choice.Considered, fmt.Sprintf("fallback: the two-layer certificate failed (%s); depth2 certified it (residual %.1e)", first.Reason, d2.Certificate.Residual))
	res.Choice.Learner = Depth2
	res.Choice.Reason = "the two-layer learner's certificate failed and the depth-2 learner's holds: the network has biases (too small for the screen) or needs them"
	res.TwoLayer, res.Depth2 = nil, d2
	return res, nil
}

// biasGlanceRows is how many rows depth2.OutputBiasZ reads before Fit
// decides which exact route to try first.
const biasGlanceRows = 20000

// depth2Exact reports whether Fit may try depth2's exact route before the
// bias screen: not when the caller named a two-layer start (--start
// tensor), a request for the two-layer learner's exact route — depth2's
// would certify bias-free data too, with zero biases.
func depth2Exact(opt Options) bool {
	return opt.Start == "" || opt.Start == twolayer.StartAuto
}

// exactDepth2 runs depth2's exact route (depth2.RouteSteinOnly). When it
// certifies, it sets res.Depth2 and sends the choice to depth2, noting why
// the route ran (how); ok is false when the route did not apply or did not
// certify, and err is any other error.
func exactDepth2(ctx context.Context, X, Y *mat.Dense, opt Options, ch *Choice, res *Result, how string) (ok bool, err error) {
	exact, err := fitDepth2(ctx, X, Y, opt, depth2.RouteSteinOnly)
	if errors.Is(err, errs.ErrNotExact) || errors.Is(err, errs.ErrInput) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	res.Depth2 = exact
	ch.Considered = append(ch.Considered, fmt.Sprintf("biases: %s; the depth-2 learner's exact route certified the data (residual %.1e)", how, exact.Certificate.Residual))
	ch.Learner, ch.Reason = Depth2, "a network with biases reproduces Y exactly (the depth-2 learner's exact route certified it): the depth-2 learner"
	return true, nil
}

// fitTwoLayer runs the two-layer learner; g is Choose's Gaussian check of
// X with opt.Seed (nil when it did not run), which twolayer.Fit then reuses.
func fitTwoLayer(ctx context.Context, X, Y *mat.Dense, opt Options, g *twolayer.GaussianCheck) (*twolayer.Result, error) {
	o := opt.Options
	o.Gaussian = g
	return twolayer.Fit(ctx, X, Y, o)
}

func fitDepth2(ctx context.Context, X, Y *mat.Dense, opt Options, route depth2.Route) (*depth2.Result, error) {
	return depth2.Fit(ctx, X, Y, depth2.Options{
		Hidden: opt.Hidden, CertTol: opt.CertTol, Seed: opt.Seed, Route: route, Progress: opt.Progress,
	})
}
