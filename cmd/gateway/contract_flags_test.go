package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"
)

// TestDesignFlags holds the gateway to DESIGN.md's wire contract, which
// tests outside the project use: each command has each flag it names, with
// the default it names, and serve takes each of its flags from a HOSTGATE_*
// variable too (TestFlagsFromEnvironment checks the mechanism on flags of
// its own; this checks the commands' flags go through it).
func TestDesignFlags(t *testing.T) {
	ctx := context.Background()
	help := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, append(args, "--help"))
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("gateway %v --help: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	// flagDefault is the default flag.PrintDefaults shows for name, "" for
	// none, and whether the flag is defined at all.
	flagDefault := func(usage, name string) (string, bool) {
		m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `(?: .*)?\n((?:    .*\n)*)`).FindStringSubmatch(usage)
		if m == nil {
			return "", false
		}
		d := regexp.MustCompile(`\(default "?([^")]*)"?\)`).FindStringSubmatch(m[0])
		if d == nil {
			return "", true
		}
		return d[1], true
	}
	for _, c := range []struct {
		cmd      []string
		flags    map[string]string // flag: its default in DESIGN ("" when it names none)
		allInEnv bool
	}{
		{[]string{"serve"}, map[string]string{"listen": "127.0.0.1:8080", "state-dir": "", "public-url": "", "preview-domain": "", "docker": "auto", "agent-binary": ""}, true},
		{[]string{"token", "create"}, map[string]string{"role": "", "host": "", "state-dir": ""}, false},
		{[]string{"proxy"}, map[string]string{"url": "", "token": ""}, false},
	} {
		usage := help(c.cmd...)
		for name, want := range c.flags {
			got, ok := flagDefault(usage, name)
			switch {
			case !ok:
				t.Errorf("gateway %s has no --%s:\n%s", strings.Join(c.cmd, " "), name, usage)
			case want != "" && got != want:
				t.Errorf("gateway %s --%s defaults to %q, DESIGN says %q", strings.Join(c.cmd, " "), name, got, want)
			}
			if c.allInEnv && !strings.Contains(usage, "--"+name+" "+EnvName(name)+"\n") {
				t.Errorf("gateway %s: --%s is not also %s:\n%s", strings.Join(c.cmd, " "), name, EnvName(name), usage)
			}
		}
	}
	// proxy's two are in the environment as DESIGN names them.
	usage := help("proxy")
	for _, env := range []string{"--url HOSTGATE_URL", "--token HOSTGATE_TOKEN"} {
		if !strings.Contains(usage, env) {
			t.Errorf("gateway proxy --help lacks %q:\n%s", env, usage)
		}
	}
}
