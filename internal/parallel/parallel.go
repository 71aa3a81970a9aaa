// Package parallel runs independent tasks on up to GOMAXPROCS goroutines.
package parallel

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// WorkerPanic is the value For re-panics with on the caller's goroutine when
// a task panicked: Value is the task's original panic value and Stack the
// stack of the goroutine that ran it, taken where the panic was recovered.
type WorkerPanic struct {
	Value any
	Stack []byte
}

// Error reports the original panic value; the worker's stack is in Stack
// (kept out of the message so a top-level handler prints one short line and
// shows the stack only when asked to).
func (p *WorkerPanic) Error() string {
	return fmt.Sprintf("panic in a parallel task: %v", p.Value)
}

// Unwrap returns the original panic value when it is an error, so errors.Is
// and errors.As see through the wrapper.
func (p *WorkerPanic) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

// For runs f(w, 0), …, f(w, n−1) on up to GOMAXPROCS goroutines, where
// w < GOMAXPROCS identifies the goroutine (for per-worker scratch space).
// Tasks must be independent and write disjoint memory; then the result does
// not depend on the schedule or on GOMAXPROCS. Reductions stay deterministic
// by giving each task a fixed chunk and summing the chunks' results in index
// order afterwards.
//
// A panic in a task does not kill the process: For recovers it, the other
// workers stop taking new tasks (tasks already running finish), and once all
// workers have returned For panics on the caller's goroutine with a
// *WorkerPanic holding the original value and the worker's stack, so a
// recover in the caller (or higher up) catches it. When several tasks
// panic, the first one recovered is reported. The serial path (one worker)
// behaves the same: the first panicking task stops the loop and For panics
// with a *WorkerPanic.
func For(n int, f func(w, i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		if p := serial(n, f); p != nil {
			panic(p)
		}
		return
	}
	var (
		next    atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		crashed *WorkerPanic
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					stop.Store(true)
					mu.Lock()
					if crashed == nil {
						crashed = newWorkerPanic(v)
					}
					mu.Unlock()
				}
			}()
			for !stop.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(w, i)
			}
		}()
	}
	wg.Wait()
	if crashed != nil {
		panic(crashed)
	}
}

// serial runs the tasks in order on the caller's goroutine and returns the
// first panic as a *WorkerPanic (nil when every task returned).
func serial(n int, f func(w, i int)) (crashed *WorkerPanic) {
	defer func() {
		if v := recover(); v != nil {
			crashed = newWorkerPanic(v)
		}
	}()
	for i := 0; i < n; i++ {
		f(0, i)
	}
	return nil
}

// newWorkerPanic wraps v with the current goroutine's stack; called inside
// the deferred recover, the stack still shows the panicking frames. A value
// that already is a *WorkerPanic (a nested For) is passed on unchanged.
func newWorkerPanic(v any) *WorkerPanic {
	if p, ok := v.(*WorkerPanic); ok {
		return p
	}
	return &WorkerPanic{Value: v, Stack: debug.Stack()}
}
