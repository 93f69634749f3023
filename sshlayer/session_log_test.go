//go:build linux

package sshlayer

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestSessionLogCutsLongCommandAtACharacter: the session log shows a
// long command's start, cut before the character that straddles the
// limit, not inside it (which a JSON log turned into U+FFFD).
func TestSessionLogCutsLongCommandAtACharacter(t *testing.T) {
	var logs testenv.LogBuffer
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
