package flaghelp

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
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
