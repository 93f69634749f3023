package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestCertWithoutHomeNeedsKey: with HOME unset (cron, a service's
// environment), gateway cert's default --key was ".ssh/hostgate_ed25519"
// under whatever directory ssh ran in (a repository's work tree, where it
// could be committed): the private key was made there. It refuses,
// naming --key, and makes nothing.
func TestCertWithoutHomeNeedsKey(t *testing.T) {
	t.Setenv("HOME", "")
	dir := t.TempDir()
	t.Chdir(dir)
	var stderr bytes.Buffer
	err := run(t.Context(), stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &stderr}, []string{"cert", "box"})
	if err == nil || !strings.Contains(err.Error(), "--key") {
		t.Errorf("cert without HOME or --key: %v, want an error naming --key", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("cert without HOME made %s in the directory it ran in", entries[0].Name())
	}
}
