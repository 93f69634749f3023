//go:build linux

package sshlayer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// lockedBuffer is a bytes.Buffer a server's logger and a test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSessionLogCutsLongCommandAtACharacter: the session log shows a
// long command's start, cut before the character that straddles the
// limit, not inside it (which a JSON log turned into U+FFFD).
func TestSessionLogCutsLongCommandAtACharacter(t *testing.T) {
	var logs lockedBuffer
	ts := srvStartServer(t, &ServerConfig{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	c := srvDialServer(t, ts)
	// 199 bytes, then "é" (2 bytes) across the 200-byte limit.
	cmd := "true " + strings.Repeat("x", 194) + "é and more"
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(cmd); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	var logged string
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Msg, Command string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ssh session" {
			logged = rec.Command
		}
	}
	want := cmd[:199] + "…"
	if logged != want {
		t.Errorf("logged command %q (valid UTF-8: %v), want %q", logged, utf8.ValidString(logged), want)
	}
}
