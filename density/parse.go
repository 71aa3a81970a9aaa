package density

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a density from the command-line form NAME[:P1,P2]:
//
//	gaussian:MEAN,STD    (also normal; default 0,1)
//	logistic:LOC,SCALE   (default 0,1)
//	laplace:LOC,SCALE    (default 0,1)
//	exp:SHIFT,RATE       (also exponential; Shift + Exp(Rate); default -1,1)
//	uniform:LO,HI        (default -1,1)
//
// Errors wrap ErrInvalid and name the accepted forms.
func Parse(s string) (Density, error) {
	name, args, _ := strings.Cut(strings.TrimSpace(s), ":")
	name = strings.ToLower(strings.TrimSpace(name))
	var ps []float64
	if strings.TrimSpace(args) != "" {
		for _, f := range strings.Split(args, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: parameter %q is not a number", ErrInvalid, s, f)
			}
			ps = append(ps, v)
		}
	}
	two := func(d0, d1 float64) (float64, float64, error) {
		switch len(ps) {
		case 0:
			return d0, d1, nil
		case 2:
			return ps[0], ps[1], nil
		}
		return 0, 0, fmt.Errorf("%w: %q: %s takes two parameters, got %d", ErrInvalid, s, name, len(ps))
	}
	var p Density
	var a, b float64
	var err error
	switch name {
	case "gaussian", "normal":
		a, b, err = two(0, 1)
		p = Gaussian{a, b}
	case "logistic":
		a, b, err = two(0, 1)
		p = Logistic{a, b}
	case "laplace":
		a, b, err = two(0, 1)
		p = Laplace{a, b}
	case "exp", "exponential":
		a, b, err = two(-1, 1)
		p = ShiftedExp{a, b}
	case "uniform":
		a, b, err = two(-1, 1)
		p = Uniform{a, b}
	default:
		return nil, fmt.Errorf("%w: unknown density %q (want gaussian:MEAN,STD, logistic:LOC,SCALE, laplace:LOC,SCALE, exp:SHIFT,RATE or uniform:LO,HI)", ErrInvalid, s)
	}
	if err != nil {
		return nil, err
	}
	if err := Validate(p); err != nil {
		return nil, err
	}
	return p, nil
}
