// Package parallel runs independent tasks on up to GOMAXPROCS goroutines.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For runs f(w, 0), …, f(w, n−1) on up to GOMAXPROCS goroutines, where
// w < GOMAXPROCS identifies the goroutine (for per-worker scratch space).
// Tasks must be independent and write disjoint memory; then the result does
// not depend on the schedule or on GOMAXPROCS. Reductions stay deterministic
// by giving each task a fixed chunk and summing the chunks' results in index
// order afterwards.
func For(n int, f func(w, i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(w, i)
			}
		}()
	}
	wg.Wait()
}
