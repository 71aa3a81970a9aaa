package experiment_test

import (
	"fmt"

	"github.com/relurec/relurec/experiment"
)

func Example() {
	e, ok := experiment.Get("twolayer-samples")
	fmt.Println(ok, e.Name)
	cfg := experiment.Config{Quick: true, Seed: 1}
	fmt.Println(experiment.CommandLine(e.Name, cfg))
	// Output:
	// true twolayer-samples
	// relurec experiment run twolayer-samples --quick --seed 1
}
