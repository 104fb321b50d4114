package trace

import (
	"errors"
	"fmt"
)

// Class says what kind of failure an error of Run (or ExecGated) is; the
// CLI (cmd/ftprobe) turns classes into exit codes.
type Class int

const (
	// ClassFailure: a runtime failure (writing output, reading the
	// ringbuf, starting the command's launcher).
	ClassFailure Class = iota
	// ClassBadInput: the command line asks for something impossible
	// (unknown mode, no matching function, a missing privilege).
	ClassBadInput
	// ClassUnsupported: the running kernel cannot do what was asked
	// (no tracefs, no symbols, no attach mode).
	ClassUnsupported
	// ClassCommand: the traced command's own exit status (Error.Status):
	// its non-zero exit, or 126/127 when it could not be executed or
	// found, as a shell reports them.
	ClassCommand
)

// Error is an error of Run or ExecGated with its class. The outermost
// Error in a chain decides (ClassOf). Err is nil when the failure was
// already reported (the command's exit status).
type Error struct {
	Class  Class
	Status int // ClassCommand only
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("command exited with status %d", e.Status)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns err's class: the outermost *Error's in the chain, else
// ClassFailure. status is the command's exit status for ClassCommand.
func ClassOf(err error) (c Class, status int) {
	var e *Error
	if errors.As(err, &e) {
		return e.Class, e.Status
	}
	return ClassFailure, 0
}

func classed(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Err: err}
}

func badInput(err error) error    { return classed(ClassBadInput, err) }
func unsupported(err error) error { return classed(ClassUnsupported, err) }
func failed(err error) error      { return classed(ClassFailure, err) }

// commandStatus is the traced command's exit status, err nil when it was
// already reported (the command ran and exited non-zero).
func commandStatus(status int, err error) error {
	return &Error{Class: ClassCommand, Status: status, Err: err}
}
