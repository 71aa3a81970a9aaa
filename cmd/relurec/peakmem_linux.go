//go:build linux

package main

import "syscall"

// peakMemory is the process's peak resident set size in bytes (getrusage's
// ru_maxrss, which Linux reports in KiB), 0 when unknown.
func peakMemory() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}
