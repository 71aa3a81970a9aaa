package twolayer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// minSamples is the sample floor of the tensor start: the order-4 moment in k
// dimensions has relative error ~k²/√n, and the order-2 span step needs n ≫ d.
// Below this floor the start is too inaccurate for the polish to lock in.
func minSamples(d, k int) int {
	return max(20*d, 200*k*k, 1000)
}

// sampleFloor is a start's sample floor: need(d, k) samples, stated as
// rule in the error that refuses fewer.
type sampleFloor struct {
	need func(d, k int) int
	rule string
}

// tensorFloor is the floor of the moment starts (tensor start, ICA):
// minSamples.
var tensorFloor = sampleFloor{minSamples, "max(20·d, 200·k², 1000)"}

// exactFloor is the floor of the exact route from the zero-set start
// (zeroset.go), which reads no moments: zeroSetFloor.
var exactFloor = sampleFloor{zeroSetFloor, "max(2000, 30·k, 4·d)"}

// errYZero is the error for outputs that are all zero.
var errYZero = fmt.Errorf("%w: Y is identically zero; there is nothing to learn", ErrInput)

// checkData validates X and Y and returns n, d, m.
func checkData(X, Y *mat.Dense) (n, d, m int, err error) {
	if n, d, m, err = certify.CheckXY(X, Y); err != nil {
		return 0, 0, 0, err
	}
	if allZero(Y) {
		return 0, 0, 0, errYZero
	}
	return n, d, m, nil
}

// allZero reports whether every entry of Y is zero; it stops at the first
// that is not (at once, for any real Y).
func allZero(Y *mat.Dense) bool {
	raw := Y.RawMatrix()
	for i := 0; i < raw.Rows; i++ {
		for _, v := range raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols] {
			if v != 0 {
				return false
			}
		}
	}
	return true
}

func (o Options) withDefaults() Options {
	if o.CertTol <= 0 {
		o.CertTol = 1e-10
	}
	if o.Whiten == "" {
		o.Whiten = "auto"
	}
	if o.Route == "" {
		o.Route = "auto"
	}
	if o.Start == "" {
		o.Start = StartAuto
	}
	if o.Activation == "" {
		o.Activation = nn.ReLU
	}
	return o
}

// Validate returns an error wrapping ErrInput that names the option and the
// values it allows when Fit cannot run with o; the zero value is valid. Fit
// (and TensorStart, FitSparse) call it once on entry; the CLI calls it before
// reading any data.
func (o Options) Validate() error {
	if o.CertTol < 0 || math.IsNaN(o.CertTol) || math.IsInf(o.CertTol, 0) {
		return errs.InvalidOption("Options", "CertTol", "must be ≥ 0 (0 means 1e-10), got %g", o.CertTol)
	}
	o = o.withDefaults()
	if !slices.Contains(Routes, o.Route) {
		return errs.InvalidOption("Options", "Route", "must be one of %s, got %q", routeList(), o.Route)
	}
	switch o.Whiten {
	case WhitenAuto, WhitenAlways, WhitenNever:
	default:
		return errs.InvalidOption("Options", "Whiten", "must be auto, always or never, got %q", o.Whiten)
	}
	switch o.Start {
	case StartAuto, StartParity, StartTensor:
	default:
		return errs.InvalidOption("Options", "Start", "must be auto, parity or tensor, got %q", o.Start)
	}
	if err := checkActivation(o.Activation); err != nil {
		return err
	}
	return checkHidden(o.Hidden)
}

// validateRoute is the entry check of a function that runs one route
// (WorstCase, ICAStart, FitICA, FitFPT, FitSparse): Validate, with Route
// ignored, since the function names the route.
func (o Options) validateRoute() error {
	o.Route = UseAuto
	return o.Validate()
}

// resolve is o with every default filled in for the data of p: CertTol
// follows their precision (certify.DefaultTol) unless the caller set one,
// the rest as withDefaults. Fit resolves its options once and passes them
// down; the routes resolve what their own entry points were given the same
// way (on options already resolved it changes nothing).
func (o Options) resolve(p *problem) Options {
	if o.CertTol == 0 {
		o.CertTol = certify.DefaultTol(p.roundoff)
	}
	return o.withDefaults()
}

// routeList is Routes as "auto, exact, …", for messages.
func routeList() string {
	names := make([]string, len(Routes))
	for i, r := range Routes {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// checkHidden is the check of Options.Hidden: 0 infers the width, a
// negative width is an error.
func checkHidden(hidden int) error {
	if hidden < 0 {
		return errs.InvalidOption("Options", "Hidden", "must be ≥ 0 (0 infers k from the rank of Y), got %d", hidden)
	}
	return nil
}

func (o Options) progress(stage string, done, total int) {
	if o.Progress != nil {
		o.Progress(stage, done, total)
	}
}

// checkXYV is the entry check of the functions that take the data pair and
// a first-layer weight matrix (SolveU, RecoverSigns, Refine): X n×d and Y
// n×m as certify.CheckXY wants them, and the matrix named vname k×d with
// 1 ≤ k, finite. fn names the function in the messages.
func checkXYV(fn string, X, Y, V *mat.Dense, vname string) (n, d, m, k int, err error) {
	if n, d, m, err = certify.CheckXY(X, Y); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%s: %w", fn, err)
	}
	if k, _, err = certify.CheckMatrix(fn, vname, V, -1, d, fmt.Sprintf("k×d with d = %d (X's columns)", d)); err != nil {
		return 0, 0, 0, 0, err
	}
	return n, d, m, k, nil
}
