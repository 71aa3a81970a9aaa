//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup makes cmd's process the leader of a new process group.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// termGroup asks every process of p's group to end (SIGTERM).
func termGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }

// killGroup ends every process of p's group (SIGKILL), and p itself should
// it have left the group.
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
