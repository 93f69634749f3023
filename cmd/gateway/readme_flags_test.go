//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/agent"
)

// TestReadmeCommandFlags keeps each `gateway COMMAND … --flag` and `agent
// COMMAND … --flag` the README and deploy/ give (a code span, a line of a
// code block or of a unit file, an ExecStart commented or not) one whose
// flags that command defines. The module's TestReadmeFlagsExist finds each
// flag in some command; a flag copied onto another (`gateway serve
// --ca-file`, `agent connect --listen`) would still be refused by the
// command an operator runs.
func TestReadmeCommandFlags(t *testing.T) {
	texts := map[string]string{}
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Every line of a code block; then, the blocks taken out (their
	// fences would pair with the spans' backquotes), every code span,
	// joined across the README's line breaks.
	var readme []string
	fenced := regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	for _, m := range fenced.FindAllStringSubmatch(string(b), -1) {
		readme = append(readme, m[1])
	}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(fenced.ReplaceAllString(string(b), ""), -1) {
		readme = append(readme, strings.Join(strings.Fields(m[1]), " "))
	}
	texts["README.md"] = strings.Join(readme, "\n")
	err = filepath.WalkDir(filepath.Join("..", "..", "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		texts[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// flagsOf is the flags `prog cmd…` defines, as its -h lists them.
	cache := map[string]map[string]bool{}
	flagsOf := func(prog string, cmd ...string) (map[string]bool, bool) {
		key := prog + " " + strings.Join(cmd, " ")
		if f, ok := cache[key]; ok {
			return f, f != nil
		}
		var out, errb bytes.Buffer
		args := append(append([]string(nil), cmd[1:]...), "--help")
		var err error
		switch prog {
		case "gateway":
			err = run(context.Background(), stdio{in: strings.NewReader(""), out: &out, err: &errb}, append([]string{cmd[0]}, args...))
		case "agent":
			switch cmd[0] {
			case "connect":
				err = agent.RunConnect(context.Background(), args, &out, &errb)
			case "serve":
				err = agent.RunServe(context.Background(), args, &agent.ServeIO{Stderr: &errb, Help: &out})
			default:
				cache[key] = nil
				return nil, false
			}
		}
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			cache[key] = nil
			return nil, false
		}
		f := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(out.String(), -1) {
			f[m[1]] = true
		}
		cache[key] = f
		return f, true
	}

	// A command after the start, a space, a path or a quote (not
	// --gateway, nor gw.example.com/gateway), up to a shell's or
	// ssh_config's end of it.
	invocation := regexp.MustCompile(`(?m)(?:^|[\s/"'=])(gateway|agent) ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?([^|;&"\n]*)`)
	named := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	checked := 0
	for name, text := range texts {
		for _, m := range invocation.FindAllStringSubmatch(text, -1) {
			prog, cmd, verb, rest := m[1], m[2], m[3], m[4]
			// A verb (token create, host reset-key) when the command
			// takes it, else the first word of the rest (cert's HOST).
			defined, ok := flagsOf(prog, cmd, verb)
			if !ok || verb == "" {
				if defined, ok = flagsOf(prog, cmd); !ok {
					continue // prose: "the agent pins", "gateway stops"
				}
			}
			for _, f := range named.FindAllStringSubmatch(rest, -1) {
				checked++
				if !defined[f[1]] && f[1] != "help" {
					t.Errorf("%s: `%s %s` has no --%s: %s", name, prog, strings.TrimSpace(cmd+" "+verb), f[1], strings.TrimSpace(m[0]))
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d flags of commands in the README and deploy/: has the search lost its way?", checked)
	}
}
