//go:build unix

package safefile

import (
	"errors"
	"os"
	"syscall"
)

// flock applies the flock(2) operation how to f, waiting again when a
// signal interrupts the wait.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// guard takes a shared lock on a temporary file for as long as f stays
// open, marking the file as in use (inUse). A file system without locks
// leaves the file unmarked; the process check of removeStale still holds.
func guard(f *os.File) { _ = flock(f, syscall.LOCK_SH|syscall.LOCK_NB) }

// inUse reports whether another open file holds a lock on f's file; when
// none does, f takes an exclusive lock, kept until f is closed.
func inUse(f *os.File) bool {
	return errors.Is(flock(f, syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

// lockExclusive waits for an exclusive lock on f, kept until f is closed.
func lockExclusive(f *os.File) error { return flock(f, syscall.LOCK_EX) }
