package dataio

import (
	"bufio"
	"fmt"
	"github.com/relurec/relurec/errs"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The memory budget bounds the float64 matrix any reader of this package
// builds. The readers already refuse a size field the file cannot back (a
// shape larger than the bytes present); the budget handles the other case,
// a file that really holds (or decompresses to) more than the machine can
// take, which would otherwise end in an out-of-memory crash instead of an
// error the user can act on.

// budget is the byte limit set by SetMemoryBudget; 0 means the default.
var budget atomic.Int64

// SetMemoryBudget sets the largest matrix, in bytes of float64, that
// ReadMatrix and the other readers will allocate; a larger array gives an
// error wrapping ErrTooLarge before anything is allocated. bytes ≤ 0
// restores the default, half of the machine's memory (or of the cgroup
// memory limit, whichever is smaller), so that a model fitted on the data
// still has room. The relurec CLI sets it from --max-memory.
func SetMemoryBudget(bytes int64) {
	if bytes < 0 {
		bytes = 0
	}
	budget.Store(bytes)
}

// MemoryBudget returns the current memory budget in bytes; see
// SetMemoryBudget.
func MemoryBudget() int64 {
	if b := budget.Load(); b > 0 {
		return b
	}
	return defaultBudget()
}

// fallbackBudget is the default when the machine's memory cannot be read
// (not Linux): 8 GiB, a laptop's worth.
const fallbackBudget = 8 << 30

var defaultBudget = sync.OnceValue(func() int64 {
	limit := memTotal()
	if c := cgroupLimit(); c > 0 && (limit <= 0 || c < limit) {
		limit = c
	}
	if limit <= 0 {
		return fallbackBudget
	}
	return limit / 2
})

// memTotal returns MemTotal from /proc/meminfo in bytes, or 0.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 || kb > math.MaxInt64/1024 {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// cgroupLimit returns the cgroup v2 memory limit of this process in bytes,
// or 0 when there is none ("max") or it cannot be read.
func cgroupLimit() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

// CheckMemory is the one check every allocation sized by a file, a model or
// a flag goes through before it is made: it returns nil when need bytes fit
// the memory budget, else an error wrapping ErrTooLarge that names what
// needs them ("X (6025 × 3002) and Y (6025 × 1)"), their size, the budget,
// and fix, what asks for less ("use fewer --vars or --clauses"; may be
// empty), as the parts of an errs.Message so that an option it names stays
// apart from the text ("use a smaller ", errs.Option{...}). need is a float64 so that sizes a hostile header multiplies out
// cannot overflow; NaN and Inf count as too large.
func CheckMemory(need float64, what string, fix ...any) error {
	b := MemoryBudget()
	if need <= float64(b) {
		return nil
	}
	msg := errs.Message{fmt.Sprintf("%s: %s needed but the memory budget is %s", what, FormatBytes(need), FormatBytes(float64(b)))}
	if errs.Message(fix).String() != "" {
		msg = append(msg, "; ", errs.Message(fix))
	}
	return fmt.Errorf("%w: %w", errs.Options(nil, msg...), ErrTooLarge)
}

// checkBudget refuses a rows × cols float64 matrix larger than the memory
// budget.
func checkBudget(rows, cols int) error {
	return CheckMemory(float64(rows)*float64(cols)*8, fmt.Sprintf("a %d × %d array of float64", rows, cols), "")
}

// FormatBytes writes a byte count the way people read it: "812 B",
// "3.1 MB", "1.6 GB", "7.45 TB" (powers of 1000).
func FormatBytes(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f %s", n, units[i])
	case n >= 100:
		return fmt.Sprintf("%.0f %s", n, units[i])
	case n >= 10:
		return fmt.Sprintf("%.1f %s", n, units[i])
	default:
		return fmt.Sprintf("%.2f %s", n, units[i])
	}
}

// ParseBytes reads a size such as "512MB", "2GiB", "1.5G", "800m" or a
// plain number of bytes, as --max-memory takes it: k, M, G, T are powers of
// 1000, Ki, Mi, Gi, Ti powers of 1024, a trailing "B" optional, case
// ignored except that a lone "b" is bytes.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "b")
	mult := 1.0
	lower := strings.ToLower(t)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}} {
		if strings.HasSuffix(lower, u.suffix) {
			mult, t = u.mult, strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: expected a positive number of bytes with an optional unit, such as 512MB, 2GiB or 16G", s)
	}
	return int64(v * mult), nil
}
