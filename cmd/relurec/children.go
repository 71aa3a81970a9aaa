package main

import (
	"os"
	"os/exec"
	"sync"
)

// children are the process groups relurec has started (extract's
// --query-cmd) and not yet ended. Each child leads a group of its own
// (ownGroup), so a Ctrl-C at the terminal reaches relurec alone, and
// relurec ends the whole group: the child and everything it started.
var children = struct {
	sync.Mutex
	procs map[*os.Process]bool
}{procs: map[*os.Process]bool{}}

// startChild starts cmd as the leader of a new process group and records
// it, under the lock killChildrenAndHold takes, so that no child starts
// unseen by the interrupt handler.
func startChild(cmd *exec.Cmd) error {
	ownGroup(cmd)
	children.Lock()
	defer children.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	children.procs[cmd.Process] = true
	return nil
}

// forgetChild drops p, whose group has been killed, from the record.
func forgetChild(p *os.Process) {
	children.Lock()
	defer children.Unlock()
	delete(children.procs, p)
}

// killChildrenAndHold kills every recorded child's process group and keeps
// the lock, so that none starts afterwards. The interrupt handler calls it
// right before the process exits, when the command did not end its
// children itself in time.
func killChildrenAndHold() {
	children.Lock()
	for p := range children.procs {
		killGroup(p)
	}
}
