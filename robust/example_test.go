package robust_test

import (
	"fmt"
	"math"

	"github.com/relurec/relurec/density"
	"github.com/relurec/relurec/robust"
	"github.com/relurec/relurec/synth"
)

// Recover a unit code from v = ReLU(A·c* + b) + e + w with 40 outliers of
// size ~50 among d = 4000 observations. ĉ estimates μ·c* with μ = E_bΦ(b);
// with the bias density known, Result.CScaled = ĉ/μ estimates c* itself.
func Example() {
	bias := density.Gaussian{Mean: 0, Std: 0.5}
	in, _ := synth.RobustData(synth.RobustConfig{D: 4000, K: 10, N: 1, S: 40, Magnitude: 50, Delta: 0.1, Bias: bias}, synth.NewRand(1))
	res, err := robust.Recover(in.A, in.V.RawRowView(0), robust.Options{Bias: bias})
	if err != nil {
		panic(err)
	}
	errC := 0.0
	for j, c := range in.C.RawRowView(0) {
		errC += (res.CScaled[j] - c) * (res.CScaled[j] - c)
	}
	fmt.Printf("μ = %.2f, threshold rule %s\n", res.Mu, res.Rule)
	fmt.Println("KKT certificate met:", res.Certificate.Met)
	fmt.Println("‖ĉ/μ − c*‖ < 0.2:", math.Sqrt(errC) < 0.2)
	fmt.Println("outliers flagged ≥ 40:", res.Outliers >= 40)
	// Output:
	// μ = 0.50, threshold rule mad
	// KKT certificate met: true
	// ‖ĉ/μ − c*‖ < 0.2: true
	// outliers flagged ≥ 40: true
}
