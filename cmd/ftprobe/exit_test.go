package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftprobe/ftprobe/internal/exitcode"
	"github.com/ftprobe/ftprobe/internal/kfeat"
	"github.com/ftprobe/ftprobe/internal/trace"
)

// The exit code of trace is decided here, from the class trace gives its
// error; the outermost class wins.
func TestTraceExitCodes(t *testing.T) {
	unsup := &trace.Error{Class: trace.ClassUnsupported, Err: fmt.Errorf("fentry on vfs_read: %w", kfeat.ErrUnsupported)}
	for _, c := range []struct {
		name   string
		err    error
		code   int
		silent bool
	}{
		{"nil", nil, 0, true},
		{"plain", errors.New("write events: broken pipe"), exitcode.Failure, false},
		{"unsupported", fmt.Errorf("trace: %w", unsup), exitcode.Unsupported, false},
		{"bad input around unsupported", &trace.Error{Class: trace.ClassBadInput, Err: fmt.Errorf("trace: %w", unsup)}, exitcode.BadInput, false},
		{"failure", &trace.Error{Class: trace.ClassFailure, Err: errors.New("ringbuf")}, exitcode.Failure, false},
		{"command exit status, reported", &trace.Error{Class: trace.ClassCommand, Status: 7}, 7, true},
		{"command not found", &trace.Error{Class: trace.ClassCommand, Status: 127, Err: errors.New("command nosuch: not found")}, 127, false},
	} {
		code, silent := exitcode.Of(traceExit(c.err))
		assert.Equal(t, c.code, code, c.name)
		assert.Equal(t, c.silent, silent, c.name)
	}
}
