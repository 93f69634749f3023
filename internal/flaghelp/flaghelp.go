// Package flaghelp parses a command's flags with the help that -h asks
// for written to standard output, as `gateway --help` and `agent --help`
// write theirs, so that `gateway serve -h | less` pages it, while a bad
// flag's complaint still goes to the flag set's output (standard error).
package flaghelp

import (
	"bytes"
	"errors"
	"flag"
	"io"
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
