package dockerhost

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// zeros is a writer that checks that it is given only NUL bytes.
type zeros struct{ n, bad int64 }

func (z *zeros) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != 0 {
			z.bad++
		}
	}
	z.n += int64(len(p))
	return len(p), nil
}

// Eight commands' large outputs, held at once until their answers are
// written, cost the host at most its output memory, not their sum: each
// command in flight held up to maxOutputBytes (64 MiB) in the heap, and
// eight parallel 63 MiB outputs took a gateway to 1.1 GB of RSS (found by
// the sandboxmem audit). The rest is spooled and reads back intact.
func TestOutputMemoryBoundsHeldOutput(t *testing.T) {
	const (
		commands = 8
		each     = 8 << 20
		memory   = 2 << 20
	)
	r := &ProcessRunner{mem: &outputMemory{limit: memory, dir: t.TempDir()}}
	chunk := make([]byte, 64<<10)
	via := fakeRunner(func(ctx context.Context, c Command) (int, error) {
		for range each / len(chunk) {
			if _, err := c.Stdout.Write(chunk); err != nil {
				return -1, err
			}
		}
		_, err := io.WriteString(c.Stderr, "done\n")
		return 3, err
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	outs := make([]*ExecOutput, 0, commands)
	defer func() {
		for _, o := range outs {
			_ = o.Close()
		}
	}()
	for range commands {
		out, _, err := r.exec(t.Context(), "c1", "65534:65534", ExecRequest{Command: "x", TimeoutMs: 60000}, 64<<20, via, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > memory+(2<<20) {
		t.Errorf("%d commands' %d MiB of output held %d MiB of heap, want about the %d MiB of output memory", commands, commands*each>>20, held>>20, memory>>20)
	}
	if used := r.mem.used.Load(); used > memory {
		t.Errorf("output memory in use: %d, over its %d", used, memory)
	}
	for i, o := range outs {
		var z zeros
		if _, err := io.Copy(&z, o.Stdout.Reader()); err != nil {
			t.Fatal(err)
		}
		errOut, err := o.Stderr.String()
		if err != nil {
			t.Fatal(err)
		}
		if z.n != each || z.bad != 0 || o.Stdout.Len() != each || errOut != "done\n" || o.ExitCode != 3 {
			t.Fatalf("command %d: stdout %d bytes (%d not NUL, Len %d), stderr %q, exit %d; want %d NULs, \"done\\n\" and 3", i, z.n, z.bad, o.Stdout.Len(), errOut, o.ExitCode, each)
		}
	}
	if !outs[commands-1].Stdout.Spooled() {
		t.Error("the last command's output is all in memory, with the output memory spent")
	}
	for _, o := range outs {
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if used := r.mem.used.Load(); used != 0 {
		t.Errorf("output memory in use after every output was closed: %d, want 0", used)
	}
}

// Output that fits the output memory stays in memory, in order, across
// chunks; what follows it goes to the spool file, and reads back after it.
func TestOutputSpillsInOrder(t *testing.T) {
	o := &Output{mem: &outputMemory{limit: 8 << 10, dir: t.TempDir()}}
	defer func() { _ = o.Close() }()
	var want bytes.Buffer
	for i := range 3000 {
		line := []byte(strings.Repeat(string(rune('a'+i%26)), i%97) + "\n")
		want.Write(line)
		if err := o.write(line); err != nil {
			t.Fatal(err)
		}
	}
	got, err := o.String()
	if err != nil {
		t.Fatal(err)
	}
	if got != want.String() || !o.Spooled() || o.Len() != int64(want.Len()) {
		t.Fatalf("read back %d bytes (equal %v, spooled %v, Len %d), want %d", len(got), got == want.String(), o.Spooled(), o.Len(), want.Len())
	}
}

// Output the gateway can neither hold nor spool (its disk is full, its
// spool directory gone) answers storage_unavailable and keeps the
// execution: the gateway's disk is no fault of the command. The error
// carries what the command printed up to the write that found no room
// (here the output memory's one chunk, 512 bytes).
func TestOutputSpoolFailureKeepsExecution(t *testing.T) {
	r := &ProcessRunner{
		mem: &outputMemory{limit: outputChunkMin, dir: filepath.Join(t.TempDir(), "gone")},
		destroy: func(string) error {
			t.Error("the execution was destroyed")
			return nil
		},
	}
	via := fakeRunner(func(ctx context.Context, c Command) (int, error) {
		if _, err := io.WriteString(c.Stdout, "hello\n"); err != nil {
			return 0, err
		}
		_, err := io.WriteString(c.Stdout, strings.Repeat("x", 2*outputChunkMin))
		return 0, err
	})
	_, _, err := r.exec(t.Context(), "c1", "65534:65534", ExecRequest{Command: "x", TimeoutMs: 60000}, 1<<20, via, nil, nil)
	if ErrorCode(err) != CodeStorageUnavailable || !strings.Contains(err.Error(), "lives on") || !strings.Contains(err.Error(), "state dir") {
		t.Fatalf("exec with no room for its output: %v, want %s naming the state dir and keeping the execution", err, CodeStorageUnavailable)
	}
	if got, want := errOutput(t, err), "hello\n"+strings.Repeat("x", outputChunkMin-len("hello\n")); got[0] != want || got[1] != "" {
		t.Fatalf("exec with no room for its output: its error's stdout %q, stderr %q; want the %d bytes kept", got[0], got[1], len(want))
	}
}
