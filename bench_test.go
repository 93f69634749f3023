package hostgate_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/hostgate/hostgate"
)

// memProvider answers from memory, so that the benchmarks below measure
// what the Host adds around a provider's and a transport's calls.
type memProvider struct {
	hostgate.Provider // the methods the benchmarks do not call
	data              []byte
	info              fs.FileInfo
}

func (p memProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) { return p.info, nil }

func (p memProvider) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(p.data)), nil
}

func benchHost(b *testing.B) *hostgate.Host {
	info, err := fs.Stat(fstest.MapFS{"f": {Data: []byte("x")}}, "f")
	if err != nil {
		b.Fatal(err)
	}
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{
			Name:      "build-01", // so that the benchmarks measure the naming
			Transport: &fakeTransport{},
			FS:        memProvider{data: make([]byte, 1<<20), info: info},
			Close:     func() error { return nil },
		}, nil
	})
	b.Cleanup(func() { _ = h.Close() })
	return h
}

// benchFS is benchHost's provider, from Host.FS.
func benchFS(b *testing.B) hostgate.Provider {
	p, err := benchHost(b).FS(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkHostStat is a stat through Host.FS's provider.
func BenchmarkHostStat(b *testing.B) {
	ctx := context.Background()
	p := benchFS(b)
	for b.Loop() {
		if _, err := p.Stat(ctx, "f"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostOpenRead opens a 1 MiB file and reads it in 32 KiB reads.
func BenchmarkHostOpenRead(b *testing.B) {
	ctx := context.Background()
	p := benchFS(b)
	buf := make([]byte, 32<<10)
	b.SetBytes(1 << 20)
	for b.Loop() {
		r, err := p.Open(ctx, "f")
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		_ = r.Close()
	}
}

// BenchmarkHostSpawn spawns a process that has exited and waits for it.
func BenchmarkHostSpawn(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	for b.Loop() {
		p, err := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostExec is Exec of a process that has exited.
func BenchmarkHostExec(b *testing.B) {
	h := benchHost(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// outputTransport spawns processes that have exited with 4 MiB of stdout
// waiting, read 32 KiB at a time as from a pipe.
type outputTransport struct{}

func (outputTransport) Spawn(context.Context, []string, hostgate.SpawnOptions) (hostgate.Process, error) {
	return outputProcess{io.LimitReader(zeroReader{}, 4<<20)}, nil
}

type outputProcess struct{ out io.Reader }

func (p outputProcess) Stdin() io.WriteCloser      { return nopWC{} }
func (p outputProcess) Stdout() io.Reader          { return p.out }
func (p outputProcess) Stderr() io.Reader          { return eofReader{} }
func (p outputProcess) Wait() error                { return nil }
func (p outputProcess) Kill(hostgate.Signal) error { return nil }

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// BenchmarkHostExecOutput is Exec collecting 4 MiB of output, with and
// without a writer (io.Discard) given it as it comes.
func BenchmarkHostExecOutput(b *testing.B) {
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: outputTransport{}, FS: memProvider{}, Close: func() error { return nil }}, nil
	})
	b.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts hostgate.ExecOptions
	}{{"collect", hostgate.ExecOptions{}}, {"stream", hostgate.ExecOptions{Stdout: io.Discard}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 << 20)
			for b.Loop() {
				res, err := h.Exec(ctx, []string{"cat"}, c.opts)
				if err != nil || len(res.Stdout) != 4<<20 {
					b.Fatal(err)
				}
			}
		})
	}
}
