package dockerhost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// DefaultOutputMemory is Config.OutputMemory's default: how many bytes of
// commands' output the host keeps in memory, all commands together.
const DefaultOutputMemory = 64 << 20

// Output chunk sizes: a small first chunk, so that the many commands that
// print a line cost little, doubling to outputChunkMax.
const (
	outputChunkMin = 512
	outputChunkMax = 64 << 10
)

// outputSpoolPattern names spool files (os.CreateTemp); a new host removes
// any a killed run left in Config.OutputDir.
const outputSpoolPattern = "output-*"

// errOutputSpool means the output could not be written to its spool file
// (the gateway's disk is full, or the directory is gone).
var errOutputSpool = errors.New("output spool")

// outputMemory is the one budget of output bytes a host keeps in memory.
// Without it, each command in flight held up to maxOutputBytes (64 MiB):
// four at once took the gateway to 679 MB of RSS, and enough callers
// could have it OOM-killed. What does not fit goes to a spool file, so no
// command waits for another's output and none fails for it.
type outputMemory struct {
	limit int64
	used  atomic.Int64
	dir   string // spool files' directory; "" is os.TempDir()
}

// take reserves n bytes, or reports that they do not fit.
func (m *outputMemory) take(n int64) bool {
	if m.used.Add(n) > m.limit {
		m.used.Add(-n)
		return false
	}
	return true
}

func (m *outputMemory) give(n int64) { m.used.Add(-n) }

// sweepSpool removes the spool files a killed run left in dir. Each is
// unlinked as soon as it is made, so only a kill in between leaves one.
func sweepSpool(dir string) {
	// The directory read and its names matched, not filepath.Glob of its
	// path, which for a dir holding a pattern's characters ("out[1]")
	// swept other directories it matched ("out1") and none of this one.
	ents, _ := os.ReadDir(dir)
	prefix, _, _ := strings.Cut(outputSpoolPattern, "*")
	for _, de := range ents {
		if de.Type().IsRegular() && strings.HasPrefix(de.Name(), prefix) {
			_ = os.Remove(filepath.Join(dir, de.Name()))
		}
	}
}

// Output is one output stream of a finished command as the host keeps it:
// its first bytes in memory while the host's output memory has room
// (Config.OutputMemory), the rest in an unlinked spool file in
// Config.OutputDir. Read it with Reader, as often as needed, and Close it
// to give both back. An Output is written by one command only and read
// after it ended.
type Output struct {
	mem    *outputMemory
	chunks [][]byte // full but the last
	held   int64    // memory taken from mem: the chunks' capacities
	file   *os.File // nil until memory ran out
	fileN  int64
	closed bool
}

// OutputOf is an Output holding b (not copied), for an ExecutionHost
// that has its output in memory already.
func OutputOf(b []byte) *Output {
	return &Output{chunks: [][]byte{b}}
}

// write appends p, in memory while mem has room, then to the spool file.
func (o *Output) write(p []byte) error {
	for o.file == nil && len(p) > 0 {
		if n := len(o.chunks); n > 0 {
			last := o.chunks[n-1]
			k := copy(last[len(last):cap(last)], p)
			o.chunks[n-1] = last[:len(last)+k]
			p = p[k:]
			if len(p) == 0 {
				return nil
			}
		}
		size := outputChunkMin
		if n := len(o.chunks); n > 0 {
			size = min(2*cap(o.chunks[n-1]), outputChunkMax)
		}
		if o.mem != nil && !o.mem.take(int64(size)) {
			f, err := os.CreateTemp(o.dir(), outputSpoolPattern)
			if err != nil {
				return fmt.Errorf("%w: %w", errOutputSpool, err)
			}
			// Unlinked at once: the kernel frees its space when it is
			// closed, and a gateway killed meanwhile leaves nothing.
			_ = os.Remove(f.Name())
			o.file = f
			break
		}
		o.held += int64(size)
		o.chunks = append(o.chunks, make([]byte, 0, size))
	}
	if len(p) == 0 {
		return nil
	}
	n, err := o.file.Write(p)
	o.fileN += int64(n)
	if err != nil {
		return fmt.Errorf("%w: %w", errOutputSpool, err)
	}
	return nil
}

func (o *Output) dir() string {
	if o.mem == nil || o.mem.dir == "" {
		return os.TempDir()
	}
	return o.mem.dir
}

// Len is the output's length in bytes.
func (o *Output) Len() int64 {
	if o == nil {
		return 0
	}
	n := o.fileN
	for _, c := range o.chunks {
		n += int64(len(c))
	}
	return n
}

// Spooled reports whether part of the output is in a spool file.
func (o *Output) Spooled() bool { return o != nil && o.file != nil }

// Reader reads the output from its first byte.
func (o *Output) Reader() io.Reader {
	if o == nil {
		return strings.NewReader("")
	}
	rs := make([]io.Reader, 0, len(o.chunks)+1)
	for _, c := range o.chunks {
		rs = append(rs, bytes.NewReader(c))
	}
	if o.file != nil {
		rs = append(rs, io.NewSectionReader(o.file, 0, o.fileN))
	}
	return io.MultiReader(rs...)
}

// String reads the whole output into memory.
func (o *Output) String() (string, error) {
	var b strings.Builder
	b.Grow(int(o.Len()))
	if _, err := io.Copy(&b, o.Reader()); err != nil {
		return "", fmt.Errorf("%w: read: %w", errOutputSpool, err)
	}
	return b.String(), nil
}

// bytes reads the whole output into a new slice.
func (o *Output) bytes() ([]byte, error) {
	b := make([]byte, o.Len())
	if _, err := io.ReadFull(o.Reader(), b); err != nil {
		return nil, fmt.Errorf("%w: read: %w", errOutputSpool, err)
	}
	return b, nil
}

// Close gives back the output's memory and spool file. It is idempotent.
func (o *Output) Close() error {
	if o == nil || o.closed {
		return nil
	}
	o.closed = true
	if o.mem != nil {
		o.mem.give(o.held)
	}
	o.chunks, o.held = nil, 0
	if o.file != nil {
		return o.file.Close()
	}
	return nil
}

// ExecOutput is a finished command whose output the host still keeps
// (Docker.ExecOutput): Close it once its output is read.
type ExecOutput struct {
	ExitCode       int
	Stdout, Stderr *Output
	DurationMs     int64
	// OOMKilled is ExecResult's.
	OOMKilled bool
}

// Close gives back both outputs' memory and spool files.
func (e *ExecOutput) Close() error {
	return errors.Join(e.Stdout.Close(), e.Stderr.Close())
}

// Result reads the output into an ExecResult and closes e.
func (e *ExecOutput) Result() (*ExecResult, error) {
	defer func() { _ = e.Close() }()
	stdout, err := e.Stdout.String()
	if err != nil {
		return nil, err
	}
	stderr, err := e.Stderr.String()
	if err != nil {
		return nil, err
	}
	return &ExecResult{ExitCode: e.ExitCode, Stdout: stdout, Stderr: stderr, DurationMs: e.DurationMs, OOMKilled: e.OOMKilled}, nil
}
