package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer a server's logger and a test share: the
// logger writes from the server's goroutines while the test reads.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
