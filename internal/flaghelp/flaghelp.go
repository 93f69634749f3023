// Package flaghelp parses a command's flags with the help that -h asks
// for written to standard output, as `gateway --help` and `agent --help`
// write theirs, so that `gateway serve -h | less` pages it, while a bad
// flag's complaint still goes to the flag set's output (standard error).
package flaghelp

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// Parse runs parse (fs.Parse, or a loop of them) with what fs prints
// held back; then it writes that to help when parse returned
// flag.ErrHelp, else to fs's own output. help nil means fs's output.
// Only the result says which it was: the flag package prints the usage
// before returning either.
func Parse(fs *flag.FlagSet, help io.Writer, parse func() error) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := parse()
	fs.SetOutput(out)
	if buf.Len() > 0 {
		w := out
		if errors.Is(err, flag.ErrHelp) && help != nil {
			w = help
		}
		_, _ = w.Write(buf.Bytes())
	}
	return err
}

// Want adds to the flag package's bare "parse error" for a flag of fs
// (`invalid value "10" for flag -cert-ttl: parse error`) the form the
// flag takes: a duration wanted its unit, and nothing said so. Other
// errors come back as they are.
func Want(fs *flag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	_, rest, ok := strings.Cut(err.Error(), " for flag -")
	if !ok {
		return err
	}
	name, _, _ := strings.Cut(rest, ":")
	if f := fs.Lookup(name); f != nil {
		return WantFor(f, err)
	}
	return err
}

// WantFor is Want for an error setting f (from the environment, say).
func WantFor(f *flag.Flag, err error) error {
	if err == nil || !strings.HasSuffix(err.Error(), "parse error") {
		return err
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err
	}
	var want string
	switch g.Get().(type) {
	case time.Duration:
		want = "a duration with its unit, such as 90s, 10m or 1h30m"
	case int, int64, uint, uint64:
		want = "a whole number"
	case float64:
		want = "a number"
	case bool:
		want = "true or false"
	default:
		return err
	}
	return fmt.Errorf("%w; --%s wants %s", err, f.Name, want)
}
