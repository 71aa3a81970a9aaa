package experiment_test

import (
	"fmt"

	"github.com/relurec/relurec/experiment"
)

func Example() {
	for _, e := range experiment.List() {
		fmt.Println(e.Name)
	}
	cfg := experiment.Config{Quick: true, Seed: 1}
	fmt.Println(experiment.CommandLine("twolayer-samples", cfg))
	// Output:
	// twolayer-samples
	// relurec experiment run twolayer-samples --quick --seed 1
}
