package parallel

import (
	"runtime"
	"testing"
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
