// Package memtest measures the heap memory a piece of code takes, for the
// tests that hold readers and evaluators to the memory budget.
package memtest

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
)

// Allocated returns the bytes f allocates on the heap, garbage included.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Peak returns the most heap (live objects and garbage not yet collected)
// seen while f runs, sampled by a second goroutine: a lower bound of the
// true peak, which a test compares with a limit f must stay under.
func Peak(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak.Load()
}
