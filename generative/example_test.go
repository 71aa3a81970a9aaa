package generative_test

import (
	"context"
	"fmt"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/generative"
	"github.com/relurec/relurec/synth"
)

// Learn col(A) from 400 observations Y = ReLU(C·Aᵀ + 1·bᵀ) of a d = 50, k = 3
// generator with bias N(0.5, 1): exact on the identifiable units, far better
// than the SVD of the centred data.
func Example() {
	in, _ := synth.GenerativeData(synth.GenerativeConfig{D: 50, K: 3, N: 400, Bias: density.Gaussian{Mean: 0.5, Std: 1}}, synth.NewRand(1))
	res, err := generative.Fit(context.Background(), in.Y, generative.Options{Rank: 3})
	if err != nil {
		panic(err)
	}
	rows := generative.WellObservedRows(in.Y, 3+2, 0)
	restricted, _ := generative.SinThetaRows(in.A, res.Basis, rows)
	overall, _ := generative.SinTheta(in.A, res.Basis)
	base, _ := generative.BaselineCentredSVD(in.Y, 3)
	naive, _ := generative.SinTheta(in.A, base)
	fmt.Println("route:", res.Route, "certificate met:", res.Certificate.Met)
	fmt.Printf("sinΘ on %d well-observed units < 1e-5: %v\n", len(rows), restricted < 1e-5)
	fmt.Printf("overall sinΘ %.2f vs SVD of centred Y %.2f\n", overall, naive)
	// Output:
	// route: als certificate met: true
	// sinΘ on 50 well-observed units < 1e-5: true
	// overall sinΘ 0.00 vs SVD of centred Y 0.63
}
