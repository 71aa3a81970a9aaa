// Command relurec learns the exact weights of ReLU networks from samples.
//
// Run "relurec demo" for a first look and "relurec --help" for the command
// tree. Exit status: 0 on success, 2 on bad input (usage errors, unreadable
// or corrupt files, wrong shapes, NaN/Inf, arguments a learner rejects), 3
// when a learner's answer is not certified, 1 on any other failure, 130 when
// interrupted by SIGINT (Ctrl-C) and 143 by SIGTERM: 128 + the signal's
// number, as a shell reports a death by signal.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/relurec/relurec/errs"
	_ "github.com/relurec/relurec/internal/blasbackend"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/safefile"
)

// version is the relurec version recorded in model metadata, manifests and
// experiment results. Release builds set it with
// -ldflags "-X main.version=v0.1.0".
var version = "0.1.0-dev"

// Exit statuses.
const (
	exitOK       = 0
	exitFailure  = 1
	exitBadInput = 2
	// exitNotCertified: a learner's answer whose residual certificate is
	// not met (errs.ErrNotExact); the model is written only with
	// --approximate.
	exitNotCertified = 3
	// exitInterrupted follows the shell's 128 + SIGINT; a SIGTERM exits 143.
	exitInterrupted = 130
)

// interruptGrace is how long a command has after Ctrl-C or SIGTERM to notice
// its cancelled context and return; then (or at a second signal) the process
// kills the process groups it started, removes its temporary files and exits
// anyway. Outputs are renamed into place under locks the exit path also
// takes (internal/safefile, committed), so an interrupt at any moment leaves
// every output either as it was or complete, and the message says which.
const interruptGrace = time.Second

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	var received atomic.Value
	go func() {
		sig := <-signals
		received.Store(sig)
		cancel()
		select {
		case <-signals:
		case <-time.After(interruptGrace):
		}
		killChildrenAndHold()
		written := holdCommitted()
		safefile.RemoveAllAndHold()
		fmt.Fprintln(os.Stderr, interruptedNote(written))
		os.Exit(signalExit(sig))
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if sig, ok := received.Load().(os.Signal); ok && code == exitInterrupted {
		code = signalExit(sig)
	}
	os.Exit(code)
}

// signalExit is the shell's exit status for death by sig: 128 + its number.
func signalExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// run executes the command line args and returns the exit status. It is the
// whole program minus os.Exit, so tests call it in-process.
//
// A panic anywhere in a command (a worker's included: internal/parallel
// re-raises it here) is an internal failure, not bad input: exit 1 with a
// short message asking for a report. A cancelled context (Ctrl-C) exits 130
// (main turns it into 143 when the signal was SIGTERM).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer reportPanic(stderr, &code)
	before := committedCount()
	a := &app{stdout: stdout, stderr: stderr, args: args}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil && a.started {
		fmt.Fprintln(stderr, interruptedNote(committedSince(before)))
		return exitInterrupted
	}
	code = exitFailure
	switch {
	case !a.started || errBadInput(err):
		// Errors before a command's RunE starts come from cobra's parsing
		// of flags and arguments: usage errors.
		code = exitBadInput
	case errors.Is(err, errs.ErrNotExact):
		code = exitNotCertified
	}
	fmt.Fprintf(stderr, "relurec: %s\n", errorText(err, cmd))
	var be *badInputError
	if !a.started || (errors.As(err, &be) && be.usage) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// reportPanic, deferred, turns a panic into exit status 1 and a short
// message: a panic is a bug in relurec, never the user's bad input.
func reportPanic(stderr io.Writer, code *int) {
	r := recover()
	if r == nil {
		return
	}
	fmt.Fprintf(stderr, "relurec: internal error: %v\n", r)
	if os.Getenv("RELUREC_TRACEBACK") != "" {
		// A panic in a parallel worker was re-raised here; the stack that
		// matters is the worker's.
		var wp *parallel.WorkerPanic
		if err, ok := r.(error); ok && errors.As(err, &wp) {
			fmt.Fprintf(stderr, "worker stack:\n%s\n", wp.Stack)
		}
		stderr.Write(debug.Stack())
	} else {
		fmt.Fprintln(stderr, "This is a bug in relurec; please report it with the command line (set RELUREC_TRACEBACK=1 for the stack).")
	}
	*code = exitFailure
}

// badInputError is an error the CLI itself detected in what the user gave it:
// a flag value (usage is true) or the content of an input.
type badInputError struct {
	msg   string
	usage bool
	// err is the library error msg was made from, if any.
	err error
}

func (e *badInputError) Error() string { return e.msg }
func (e *badInputError) Unwrap() error { return e.err }

// usageErrorf reports a wrong flag or argument; it exits 2 with a hint to
// --help.
func usageErrorf(format string, args ...any) error {
	return &badInputError{msg: fmt.Sprintf(format, args...), usage: true}
}

// inputErrorf reports a problem with an input's content or shape; it exits 2.
func inputErrorf(format string, args ...any) error {
	return &badInputError{msg: fmt.Sprintf(format, args...)}
}

// errBadInput classifies err: true when it is the user's input that is wrong
// (exit status 2), false for any other failure (exit status 1). It recognises
// the CLI's own usage/input errors, every library error of kind
// errs.ErrInput (each package wraps that one value, so a new package needs no
// change here), and files that are missing or not readable.
func errBadInput(err error) bool {
	if err == nil {
		return false
	}
	var be *badInputError
	if errors.As(err, &be) {
		return true
	}
	for _, s := range []error{errs.ErrInput, fs.ErrNotExist, fs.ErrPermission} {
		if errors.Is(err, s) {
			return true
		}
	}
	// Reading a directory as a file, and similar path mistakes.
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, syscall.EISDIR) {
		return true
	}
	return false
}
