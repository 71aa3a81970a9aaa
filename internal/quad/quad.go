// Package quad integrates smooth one-dimensional functions.
package quad

// GaussLegendre integrates f on [a, b] with `panels` composite 8-point
// Gauss–Legendre panels. Each panel is exact for polynomials of degree 15;
// for functions smooth on [a, b] the error falls like h^16 with the panel
// width h. Split the interval at kinks (e.g. the 0 of a rectified function).
func GaussLegendre(f func(float64) float64, a, b float64, panels int) float64 {
	h := (b - a) / float64(panels)
	sum := 0.0
	for p := 0; p < panels; p++ {
		mid := a + (float64(p)+0.5)*h
		for i, x := range nodes {
			sum += weights[i] * f(mid+x*h/2)
		}
	}
	return sum * h / 2
}

// Nodes and weights of the 8-point Gauss–Legendre rule on [−1, 1].
var (
	nodes = [8]float64{-0.9602898564975363, -0.7966664774136267, -0.5255324099163290, -0.1834346424956498,
		0.1834346424956498, 0.5255324099163290, 0.7966664774136267, 0.9602898564975363}
	weights = [8]float64{0.1012285362903763, 0.2223810344533745, 0.3137066458778873, 0.3626837833783620,
		0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763}
)
