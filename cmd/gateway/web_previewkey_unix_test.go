//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/previewauth"
)

// TestPreviewKeyKept: the previews' cookie key is made once in the state
// dir (0600, the gateway user's alone) and read at every start after, so a
// cookie minted before a restart is taken after it; a file that holds no
// key is named with the fix, and previews go on with a key of the
// process's own. Each process made its own, and a restart logged every
// open preview out, for good for a page's own requests (Vite's hot reload).
func TestPreviewKeyKept(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	before := previewSigner(dir, logger)
	c, _ := before.Cookie("tok1", "h1", 3000, time.Hour)
	fi, err := os.Stat(filepath.Join(dir, previewKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != previewauth.KeySize {
		t.Fatalf("the key file: %v %v, want %d bytes, 0600", fi, err, previewauth.KeySize)
	}
	after := previewSigner(dir, logger)
	if who, err := after.CheckCookie(c, "h1", 3000); err != nil || who != "tok1" {
		t.Fatalf("a cookie from before the restart: %q %v, want tok1", who, err)
	}
	if log.Len() != 0 {
		t.Errorf("logged: %s", log.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the state dir holds %v, want the key alone", entries)
	}

	if err := os.WriteFile(filepath.Join(dir, previewKeyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := previewSigner(dir, logger)
	c, _ = s.Cookie("tok1", "h1", 3000, time.Hour)
	if _, err := s.CheckCookie(c, "h1", 3000); err != nil {
		t.Errorf("with a bad key file, the previews' cookies: %v", err)
	}
	if got := log.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "holds 5 bytes, not a key of 32: delete it") {
		t.Errorf("a bad key file logged %q, want a warning naming it and the fix", got)
	}
}
