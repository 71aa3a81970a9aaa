package nn

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// Activation names an elementwise nonlinearity applied after a Linear layer.
// The names follow PyTorch's module names in lower case where PyTorch has
// one ("relu", "identity"); the rectified activations of [BJW19, App 9.1]
// have names of their own:
//
//   - "relupow<c>", e.g. "relupow2", "relupow3", "relupow0.5": the rectified
//     power max(x, 0)^c for a real c > 0 (build it with RectPow). The
//     exponent is part of the name, so it survives every file format that
//     stores the name (the safetensors architecture header) without a
//     separate field.
//   - "reluexp": the rectified exponential e^{max(x, 0)} − 1 (RectExp).
//
// An Activation value is always spelled canonically (see ParseActivation):
// "relupow1" is ReLU and "relupow2.0" is "relupow2", so two equal
// activations compare equal with ==.
type Activation string

const (
	// Identity applies no nonlinearity. A Linear layer followed by Identity and
	// another Linear layer is how a factored (low-rank) layer is stored.
	Identity Activation = "identity"
	// ReLU is max(x, 0).
	ReLU Activation = "relu"
	// RectExp is the rectified exponential e^{max(x, 0)} − 1: zero for x ≤ 0,
	// convex and increasing for x > 0. It has no scaling symmetry
	// (φ(s·x) ≠ s^a·φ(x)), so the norms of the incoming rows are identifiable.
	RectExp Activation = "reluexp"
)

// relupowPrefix starts the name of a rectified power.
const relupowPrefix = "relupow"

// RectPow returns the rectified power max(x, 0)^c, named "relupow<c>" with c
// formatted by strconv's shortest representation (RectPow(2) = "relupow2",
// RectPow(0.5) = "relupow0.5"). RectPow(1) is ReLU. c must be finite and
// positive; otherwise the returned name is not Valid.
func RectPow(c float64) Activation {
	if c == 1 {
		return ReLU
	}
	return Activation(relupowPrefix + strconv.FormatFloat(c, 'g', -1, 64))
}

// ParseActivation returns the canonical Activation for a name, ignoring case
// and surrounding spaces: "relu", "identity", "reluexp", or "relupow<c>"
// with c a positive finite number ("relupow2", "ReLUPow0.5"). It returns a
// clear error for anything else.
func ParseActivation(name string) (Activation, error) {
	s := strings.ToLower(strings.TrimSpace(name))
	switch Activation(s) {
	case Identity, ReLU, RectExp:
		return Activation(s), nil
	}
	if rest, ok := strings.CutPrefix(s, relupowPrefix); ok {
		c, err := strconv.ParseFloat(rest, 64)
		if err != nil || !(c > 0) || math.IsInf(c, 0) {
			return "", fmt.Errorf("nn: activation %q: the exponent of relupow<c> must be a positive finite number (e.g. relupow2, relupow0.5)", name)
		}
		return RectPow(c), nil
	}
	return "", fmt.Errorf("nn: unknown activation %q (known: identity, relu, relupow<c> with c > 0 such as relupow2, reluexp)", name)
}

// Valid reports whether a is a canonically spelled activation this package
// knows.
func (a Activation) Valid() bool {
	p, err := ParseActivation(string(a))
	return err == nil && p == a
}

// Power returns the exponent c of a rectified power "relupow<c>" (1 for the
// ReLU) and whether a is one.
func (a Activation) Power() (float64, bool) {
	if a == ReLU {
		return 1, true
	}
	rest, ok := strings.CutPrefix(string(a), relupowPrefix)
	if !ok {
		return 0, false
	}
	c, err := strconv.ParseFloat(rest, 64)
	if err != nil || !(c > 0) || math.IsInf(c, 0) {
		return 0, false
	}
	return c, true
}

// Homogeneity returns the degree a of positive homogeneity,
// φ(s·x) = s^a·φ(x) for every s > 0, and whether φ has one: 1 for the ReLU
// and the identity, c for relupow<c>, none for reluexp. It is the symmetry
// Canonical removes: a hidden unit's incoming row can be scaled by s if its
// outgoing column is scaled by s^{−a}.
func (a Activation) Homogeneity() (float64, bool) {
	if a == Identity {
		return 1, true
	}
	return a.Power()
}

// Rectified reports whether φ is zero for x ≤ 0 and strictly increasing for
// x > 0 — the class of Bakshi et al. App. 9.1, whose zero pattern is that of
// the ReLU and which Inverse can undo on positive values.
func (a Activation) Rectified() bool {
	if a == RectExp {
		return true
	}
	_, ok := a.Power()
	return ok
}

// Func returns φ as a function, resolving the name once: use it in loops
// (Apply parses the name on every call). Unknown names give the identity.
// Rectified activations map x ≤ 0 and NaN to 0, as ReLU does.
func (a Activation) Func() func(float64) float64 {
	switch a {
	case ReLU:
		return func(x float64) float64 {
			if x > 0 {
				return x
			}
			return 0
		}
	case RectExp:
		return func(x float64) float64 {
			if x > 0 {
				return math.Expm1(x)
			}
			return 0
		}
	}
	if c, ok := a.Power(); ok {
		switch c {
		case 2:
			return func(x float64) float64 {
				if x > 0 {
					return x * x
				}
				return 0
			}
		case 3:
			return func(x float64) float64 {
				if x > 0 {
					return x * x * x
				}
				return 0
			}
		}
		return func(x float64) float64 {
			if x > 0 {
				return math.Pow(x, c)
			}
			return 0
		}
	}
	return func(x float64) float64 { return x }
}

// Apply returns the activation of x.
func (a Activation) Apply(x float64) float64 { return a.Func()(x) }

// Deriv returns φ′ as a function of the pre-activation x. At the kink x = 0
// (and for x < 0) a rectified activation's derivative is taken as 0, as
// PyTorch does for the ReLU; relupow<c> with c < 1 has an unbounded
// derivative near 0+, which is returned as is. The identity's is 1.
func (a Activation) Deriv() func(float64) float64 {
	switch a {
	case ReLU:
		return func(x float64) float64 {
			if x > 0 {
				return 1
			}
			return 0
		}
	case RectExp:
		return func(x float64) float64 {
			if x > 0 {
				return math.Exp(x)
			}
			return 0
		}
	}
	if c, ok := a.Power(); ok {
		return func(x float64) float64 {
			if x > 0 {
				return c * math.Pow(x, c-1)
			}
			return 0
		}
	}
	return func(float64) float64 { return 1 }
}

// Inverse returns φ⁻¹ on the positive values of a rectified activation:
// y^{1/c} for relupow<c>, log(1 + y) for reluexp, y for the ReLU (and the
// identity). It is what Bakshi et al. App. 9.1 applies to the positive
// coordinates of an activation to get back a linear system. Values y ≤ 0
// give 0 (they carry no information about the pre-activation).
func (a Activation) Inverse() func(float64) float64 {
	switch a {
	case ReLU:
		return func(y float64) float64 { return math.Max(y, 0) }
	case RectExp:
		return func(y float64) float64 {
			if y > 0 {
				return math.Log1p(y)
			}
			return 0
		}
	}
	if c, ok := a.Power(); ok {
		switch c {
		case 2:
			return func(y float64) float64 {
				if y > 0 {
					return math.Sqrt(y)
				}
				return 0
			}
		case 3:
			return func(y float64) float64 {
				if y > 0 {
					return math.Cbrt(y)
				}
				return 0
			}
		}
		return func(y float64) float64 {
			if y > 0 {
				return math.Pow(y, 1/c)
			}
			return 0
		}
	}
	return func(y float64) float64 { return y }
}

// NewTwoLayerAct returns the bias-free network x ↦ U·φ(V·x), i.e.
// Y = φ(X·Vᵀ)·Uᵀ, with V k×d, U m×k and φ = act; NewTwoLayer is the ReLU
// case. The matrices are not copied.
func NewTwoLayerAct(V, U *mat.Dense, act Activation) *MLP {
	m := NewTwoLayer(V, U)
	m.Layers[0].Act = act
	return m
}
