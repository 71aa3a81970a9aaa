package safefile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// removeStale deletes the temporary files that killed relurec processes
// left in dir (SIGKILL and power loss give no chance to clean up), whatever
// output they were for: those whose writer's process no longer exists and
// that no process holds a lock on. The lock is what a live temporary file of
// a process this one cannot see (another PID namespace, another host on a
// network file system) keeps; the process check covers a file system
// without locks. Errors are ignored: a stale file is only wasted space.
func removeStale(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, tempPrefix)
		if !ok {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		removeUnlocked(filepath.Join(dir, name))
	}
}

// removeUnlocked removes the regular file path unless a process holds a
// lock on it.
func removeUnlocked(path string) {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if inUse(f) {
		return
	}
	os.Remove(path)
}
