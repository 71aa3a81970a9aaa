package compress

import (
	"github.com/relurec/relurec/errs"
	"slices"
	"strings"
)

// Validate returns an error wrapping ErrInput that names the option and the
// values it allows when CompressMLP cannot run with o; the zero value is
// valid. The checks that need the network (one rank per layer) and the data
// are CompressMLP's. The CLI calls it before reading anything.
func (o Options) Validate() error {
	if o.Method != "" && !slices.Contains(Methods, o.Method) {
		names := make([]string, len(Methods))
		for i, m := range Methods {
			names[i] = string(m)
		}
		return errs.InvalidOption("Options", "Method", "must be one of %s, got %q", strings.Join(names, ", "), o.Method)
	}
	if o.Allocation != "" && !slices.Contains(Allocations, o.Allocation) {
		names := make([]string, len(Allocations))
		for i, a := range Allocations {
			names[i] = string(a)
		}
		return errs.InvalidOption("Options", "Allocation", "must be one of %s, got %q", strings.Join(names, ", "), o.Allocation)
	}
	switch o.Layer.Bias {
	case "", BiasCenter, BiasAugment, BiasKeep:
	default:
		return errs.InvalidOption("LayerOptions", "Bias", "must be center, augment or keep, got %q", o.Layer.Bias)
	}
	switch o.Layer.Route {
	case "", RouteAuto, RouteQR, RouteGram, RouteProjection:
	default:
		return errs.InvalidOption("LayerOptions", "Route", "must be auto, qr, gram or projection, got %q", o.Layer.Route)
	}
	if o.Layer.Ridge < 0 {
		return errs.InvalidOption("LayerOptions", "Ridge", "must be ≥ 0, got %g", o.Layer.Ridge)
	}
	return o.Distill.withDefaults().validate()
}
