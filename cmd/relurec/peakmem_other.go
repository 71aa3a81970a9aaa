//go:build !linux

package main

// peakMemory is the process's peak resident set size: unknown (0) where
// getrusage's unit is not known to be KiB.
func peakMemory() int64 { return 0 }
