package flaghelp

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		wantErr       error
		stdout, other string // what each writer must hold
	}{
		{[]string{"-h"}, flag.ErrHelp, "-x int", ""},
		{[]string{"-y"}, nil, "", "flag provided but not defined: -y"},
		{[]string{"-x", "1"}, nil, "", ""},
	} {
		var stdout, stderr bytes.Buffer
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.SetOutput(&stderr)
		fs.Int("x", 0, "a number")
		err := Parse(fs, &stdout, func() error { return fs.Parse(tc.args) })
		if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("%q: err %v, want %v", tc.args, err, tc.wantErr)
		}
		if tc.wantErr == nil && tc.other == "" && err != nil {
			t.Errorf("%q: err %v", tc.args, err)
		}
		if !strings.Contains(stdout.String(), tc.stdout) || (tc.stdout == "" && stdout.Len() > 0) {
			t.Errorf("%q: stdout %q, want %q", tc.args, stdout.String(), tc.stdout)
		}
		if !strings.Contains(stderr.String(), tc.other) || (tc.other == "" && stderr.Len() > 0) {
			t.Errorf("%q: stderr %q, want %q", tc.args, stderr.String(), tc.other)
		}
		if fs.Output() != &stderr {
			t.Errorf("%q: the flag set's output was not put back", tc.args)
		}
	}
}

// A value the flag package cannot parse says what the flag takes, on the
// command line and from the environment (WantFor), where it said only
// "parse error" (found by the audit30 audit).
func TestWant(t *testing.T) {
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("ttl", time.Minute, "")
	fs.Int("n", 0, "")
	fs.String("s", "", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-ttl", "10"}, `invalid value "10" for flag -ttl: parse error; --ttl wants a duration with its unit, such as 90s, 10m or 1h30m`},
		{[]string{"--n=abc"}, `invalid value "abc" for flag -n: parse error; --n wants a whole number`},
		{[]string{"-x"}, "flag provided but not defined: -x"},
	} {
		err := Want(fs, Parse(fs, nil, func() error { return fs.Parse(tc.args) }))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.args, err, tc.want)
		}
	}
	f := fs.Lookup("ttl")
	if err := WantFor(f, f.Value.Set("5")); err == nil || !strings.HasSuffix(err.Error(), "parse error; --ttl wants a duration with its unit, such as 90s, 10m or 1h30m") {
		t.Errorf("WantFor: %v", err)
	}
	if err := WantFor(fs.Lookup("s"), nil); err != nil {
		t.Errorf("WantFor(nil): %v", err)
	}
}
