//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// ownGroup does nothing: without Unix process groups only the child itself
// can be ended.
func ownGroup(cmd *exec.Cmd) {}

// termGroup ends p (there is no gentler portable signal).
func termGroup(p *os.Process) { _ = p.Kill() }

// killGroup ends p.
func killGroup(p *os.Process) { _ = p.Kill() }
