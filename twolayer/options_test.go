package twolayer

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

// The shared fields of Options reach each route unchanged: Fit with Route
// set to a route and Hidden, Seed, CertTol and Progress set once returns
// what the route's own entry point returns on XOptions{Options: opt}, with
// that CertTol as the certificate's tolerance, that width, and progress
// from the route's stages.
func TestOptionsReachEachRoute(t *testing.T) {
	wc := cubeInstance(1, 30, 4, 2, 2)
	ica := newInstance(t, 1, synth.TwoLayerConfig{D: 5, K: 3, M: 4, CondV: 1}, 4000, nil, synth.Noise{})
	fpt := fptInstance(t, 3, 3, planar(t, []float64{0.3, 2.0, 4.0}, []float64{1, 1.5, 0.8}), 96)
	for _, tc := range []struct {
		route  Route
		name   string // Result.Route
		X, Y   *mat.Dense
		hidden int
		stage  string // a stage the route reports
		direct func(Options) (*Result, error)
	}{
		{UseWorstCase, RouteWorstCase, wc.X, wc.Y, 2, "units", func(o Options) (*Result, error) {
			return WorstCase(context.Background(), wc.X, wc.Y, WorstCaseOptions{Options: o})
		}},
		{UseICA, RouteICA, ica.X, ica.Y, 3, "fastica", func(o Options) (*Result, error) {
			return FitICA(context.Background(), ica.X, ica.Y, ICAOptions{Options: o})
		}},
		{UseFPT, RouteFPT, fpt.X, fpt.Y, 3, "collinearity classes", func(o Options) (*Result, error) {
			return FitFPT(context.Background(), fpt.X, fpt.Y, FPTOptions{Options: o})
		}},
	} {
		t.Run(string(tc.route), func(t *testing.T) {
			const tol = 1e-7
			var stages []string
			opt := Options{Route: tc.route, Hidden: tc.hidden, Seed: 5, CertTol: tol, Progress: func(stage string, _, _ int) {
				if !slices.Contains(stages, stage) {
					stages = append(stages, stage)
				}
			}}
			res, err := Fit(context.Background(), tc.X, tc.Y, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Route != tc.name || res.Certificate.Tol != tol || !res.Certificate.Met {
				t.Errorf("route %s, certificate %+v, want %s with tolerance %g", res.Route, res.Certificate, tc.name, tol)
			}
			if res.Diagnostics.Hidden != tc.hidden || res.Diagnostics.HiddenInferred {
				t.Errorf("hidden %d (inferred %v), want the given %d", res.Diagnostics.Hidden, res.Diagnostics.HiddenInferred, tc.hidden)
			}
			if !slices.Contains(stages, tc.stage) {
				t.Errorf("progress stages %q, want %q among them", stages, tc.stage)
			}
			want, err := tc.direct(opt)
			if err != nil {
				t.Fatal(err)
			}
			if !mat.Equal(res.Model.Layers[0].Weight, want.Model.Layers[0].Weight) || !mat.Equal(res.Model.Layers[1].Weight, want.Model.Layers[1].Weight) || res.Certificate != want.Certificate {
				t.Errorf("Fit and the route's entry point differ: certificates %+v and %+v", res.Certificate, want.Certificate)
			}
		})
	}
}

// The routes' own entry points check the shared options as Fit does, with
// Fit's messages: a negative width or a NaN CertTol is refused before any
// data are read (nil X here).
func TestRouteEntriesValidateAsFit(t *testing.T) {
	ctx := context.Background()
	entries := map[string]func(Options) error{
		"Fit":       func(o Options) error { _, err := Fit(ctx, nil, nil, o); return err },
		"WorstCase": func(o Options) error { _, err := WorstCase(ctx, nil, nil, WorstCaseOptions{Options: o}); return err },
		"ICAStart":  func(o Options) error { _, err := ICAStart(ctx, nil, nil, ICAOptions{Options: o}); return err },
		"FitICA":    func(o Options) error { _, err := FitICA(ctx, nil, nil, ICAOptions{Options: o}); return err },
		"FitFPT":    func(o Options) error { _, err := FitFPT(ctx, nil, nil, FPTOptions{Options: o}); return err },
		"FitSparse": func(o Options) error { _, err := FitSparse(ctx, nil, nil, SparseOptions{Options: o}); return err },
	}
	for _, bad := range []Options{{Hidden: -1}, {CertTol: math.NaN()}} {
		_, want := Fit(ctx, nil, nil, bad)
		for name, run := range entries {
			if err := run(bad); !errors.Is(err, ErrInput) || err.Error() != want.Error() {
				t.Errorf("%s(%+v): %v, want %v", name, bad, err, want)
			}
		}
	}
}
