package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the signal goroutine's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSignalContext: the first SIGTERM ends the context with a cause
// naming it (a cancellation); the second is said and does not stop the
// process.
func TestSignalContext(t *testing.T) {
	var log syncBuffer
	ctx, stop := signalContext(context.Background(), &log)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	<-ctx.Done()
	cause := context.Cause(ctx)
	assert.EqualError(t, cause, "interrupted by SIGTERM")
	assert.True(t, errors.Is(cause, context.Canceled))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	for !strings.Contains(log.String(), "SIGINT: still stopping") {
		time.Sleep(10 * time.Millisecond)
	}
}
