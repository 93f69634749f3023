// Package testenv holds helpers tests share about their environment.
package testenv

import (
	"os"
	"testing"
)

// RequirePeer skips t when the peer named name (OpenSSH, Docker, Chromium…)
// is missing (ok false), but fails it when HOSTGATE_E2E=require, so that a
// green CI run never hides a skipped suite.
func RequirePeer(t testing.TB, name string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("HOSTGATE_E2E") == "require" {
		t.Fatalf("peer %s missing and HOSTGATE_E2E=require", name)
	}
	t.Skipf("peer %s missing (set HOSTGATE_E2E=require to fail instead)", name)
}
