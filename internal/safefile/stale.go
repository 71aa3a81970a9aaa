package safefile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// removeStale deletes the temporary files a killed relurec process left next
// to target (SIGKILL and power loss give no chance to clean up): those named
// for target whose writer's process no longer exists. Errors are ignored; a
// stale file is only wasted space.
func removeStale(target string) {
	dir, base := filepath.Split(target)
	base = tailOf(base)
	if strings.ContainsAny(base, `*?[\`) {
		return // would be read as a pattern; such names are rare enough to skip
	}
	matches, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*-"+base))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), tempPrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		os.Remove(m)
	}
}
