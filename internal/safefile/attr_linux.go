package safefile

import (
	"os"

	"golang.org/x/sys/unix"
)

// The inode flags of chattr(1) (linux/fs.h) that forbid the renames and
// removals a commit makes.
const (
	fsImmutable = 0x10 // chattr +i
	fsAppend    = 0x20 // chattr +a
)

// fixedAttribute names the attribute that forbids replacing path or
// renaming files in it, when path is a directory: "immutable (chattr +i)",
// "append-only (chattr +a)", or "" when there is none or the file system
// does not say.
func fixedAttribute(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	switch {
	case err != nil:
		return ""
	case flags&fsImmutable != 0:
		return "immutable (chattr +i)"
	case flags&fsAppend != 0:
		return "append-only (chattr +a)"
	}
	return ""
}
