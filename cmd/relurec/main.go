// Command relurec learns the exact weights of ReLU networks from samples.
//
// Run "relurec demo" for a first look and "relurec --help" for the command
// tree. Exit status: 0 on success, 2 on bad input (usage errors, unreadable
// or corrupt files, wrong shapes, NaN/Inf, arguments a learner rejects), 1 on
// any other failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/relurec/relurec/errs"
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit status. It is the
// whole program minus os.Exit, so tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, args: args}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitFailure
	if !a.started || errBadInput(err) {
		// Errors before a command's RunE starts come from cobra's parsing
		// of flags and arguments: usage errors.
		code = exitBadInput
	}
	fmt.Fprintf(stderr, "relurec: %s\n", withFlagNames(err.Error(), cmd))
	var be *badInputError
	if !a.started || (errors.As(err, &be) && be.usage) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// badInputError is an error the CLI itself detected in what the user gave it:
// a flag value (usage is true) or the content of an input.
type badInputError struct {
	msg   string
	usage bool
}

func (e *badInputError) Error() string { return e.msg }

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
