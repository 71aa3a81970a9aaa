// Package experiment holds relurec's registered experiments: end-to-end
// measurements that reproduce a claim of one of the papers and write the
// evidence as results.json (raw runs, configuration, environment), table.md
// (a Markdown table with the command that reproduces it) and plot.png.
//
// Experiments register themselves in init functions (Register) and are run by
// name, usually through the CLI:
//
//	relurec experiment list
//	relurec experiment run twolayer-samples --out results/twolayer-samples
//
// Every random choice derives from Config.Seed, so a Config reproduces its
// numbers; timings of course vary with the machine.
package experiment
