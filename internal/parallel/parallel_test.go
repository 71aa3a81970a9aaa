package parallel

import (
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestForVisitsEveryIndexOnce(t *testing.T) {
	for _, procs := range []int{1, 3} {
		old := runtime.GOMAXPROCS(procs)
		seen := make([]int, 1000)
		For(len(seen), func(w, i int) {
			if w >= procs {
				t.Errorf("worker %d with GOMAXPROCS %d", w, procs)
			}
			seen[i]++
		})
		runtime.GOMAXPROCS(old)
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("GOMAXPROCS %d: index %d visited %d times", procs, i, c)
			}
		}
	}
}

func TestForReraisesWorkerPanicOnCaller(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		old := runtime.GOMAXPROCS(procs)
		var ran atomic.Int64
		got := func() (v any) {
			defer func() { v = recover() }()
			For(10000, func(w, i int) {
				ran.Add(1)
				if i == 3 {
					panic("boom")
				}
				time.Sleep(time.Microsecond)
			})
			return nil
		}()
		runtime.GOMAXPROCS(old)
		p, ok := got.(*WorkerPanic)
		if !ok {
			t.Fatalf("GOMAXPROCS %d: recovered %T %v, want *WorkerPanic", procs, got, got)
		}
		if p.Value != "boom" {
			t.Fatalf("GOMAXPROCS %d: panic value %v, want boom", procs, p.Value)
		}
		if !strings.Contains(string(p.Stack), "parallel_test.go") || !strings.Contains(p.Error(), "boom") {
			t.Fatalf("GOMAXPROCS %d: stack or message lost the task: %s\n%s", procs, p.Error(), p.Stack)
		}
		if r := ran.Load(); r == 10000 {
			t.Errorf("GOMAXPROCS %d: all 10000 tasks ran after a panic; workers should stop taking tasks", procs)
		}
	}
}

func TestWorkerPanicUnwrapsErrors(t *testing.T) {
	sentinel := errors.New("sentinel")
	got := func() (v any) {
		defer func() { v = recover() }()
		For(4, func(w, i int) { panic(sentinel) })
		return nil
	}()
	err, ok := got.(error)
	if !ok || !errors.Is(err, sentinel) {
		t.Fatalf("recovered %v, want an error matching the task's", got)
	}
}
