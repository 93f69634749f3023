package main

import (
	"bytes"
	"regexp"
	"testing"
)

// TestDesignFlags holds the agent to DESIGN.md's wire contract, which
// tests outside the project use: `agent connect --gateway URL --token T
// [--host-id ID] [--state-dir DIR]`, `agent serve --listen ADDR
// (--authorized-keys FILE | --trusted-ca FILE) [--state-dir DIR]`,
// `--stdio` and `--stdio --mux`.
func TestDesignFlags(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"connect": {"gateway", "token", "host-id", "state-dir"},
		"serve":   {"listen", "authorized-keys", "trusted-ca", "state-dir", "stdio", "mux"},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "--help"}, &out, &errb); code != 0 {
			t.Fatalf("agent %s --help: code %d: %s", cmd, code, errb.String())
		}
		for _, name := range flags {
			if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `(?: |$)`).MatchString(out.String()) {
				t.Errorf("agent %s has no --%s:\n%s", cmd, name, out.String())
			}
		}
	}
}
