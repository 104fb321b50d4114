// Package exitcode carries ftprobe's documented exit codes through error
// chains: 0 ok, 1 runtime failure, 2 bad input, 3 unsupported on this
// kernel; `ftprobe vm` and `trace -- COMMAND` pass a child's status through.
package exitcode

import "errors"

// Documented exit codes.
const (
	OK          = 0
	Failure     = 1
	BadInput    = 2
	Unsupported = 3
)

// Error wraps an error with the process exit code it should cause. When
// Silent is set the error has already been reported (a child's status).
type Error struct {
	Code   int
	Err    error
	Silent bool
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "exit status"
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap returns err with exit code code (nil stays nil).
func Wrap(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Status returns an error that only sets the exit code.
func Status(code int) error { return &Error{Code: code, Silent: true} }

// Of returns the exit code for err: the outermost *Error's code in the
// chain, else 1.
func Of(err error) (code int, silent bool) {
	if err == nil {
		return OK, true
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code, e.Silent
	}
	return Failure, false
}
