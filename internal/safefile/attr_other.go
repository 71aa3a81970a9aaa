//go:build !linux

package safefile

// fixedAttribute is Linux's check for chattr +a and +i; elsewhere the probe
// of CheckWritable finds a directory whose files cannot be renamed.
func fixedAttribute(path string) string { return "" }
