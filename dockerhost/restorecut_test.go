package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
)

// countingStore is a cuttingStore that counts the bytes its restores read
// of their checkpoints' tars.
type countingStore struct {
	*cuttingStore
	read atomic.Int64
}

func (s *countingStore) Open(ctx context.Context, id string) (*Manifest, io.ReadCloser, error) {
	m, rc, err := s.cuttingStore.Open(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return m, &countingReader{ReadCloser: rc, n: &s.read}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// testRestoreCutReadsNoMore: a restore cut while it loads the workspace
// (the gateway stopping, its caller gone) stops reading its checkpoint.
// The checksum of the rest decides nothing once the restore is cut, yet
// it read and hashed the whole tar first, up to 72 GiB for the largest
// diskBytes, which the gateway's stop waited for.
func testRestoreCutReadsNoMore(t *testing.T) {
	cli, img := engine(t)
	ls, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{cuttingStore: &cuttingStore{LocalStore: ls}}
	h := newTestHost(t, cli, &Config{Store: cs})

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	big := make([]byte, 48<<20)
	if err := tw.WriteHeader(&tar.Header{Name: "./big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(big))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	m := validManifest(data)
	r := small()
	r.DiskBytes, r.MemoryBytes = 64<<20, 256<<20
	m.Request = emptyReq(img, r)
	commitManifest(t, ls, m, data)

	ctx, stop := stopping(t)
	cs.arm(stop) // on the first read of the tar
	_, err = h.Restore(ctx, RestoreRequest{CheckpointID: m.CheckpointID})
	if ErrorCode(err) != CodeInterrupted {
		t.Fatalf("restore cut while it loads: %v (code %q), want %s", err, ErrorCode(err), CodeInterrupted)
	}
	if n := cs.read.Load(); n > int64(len(data))/2 {
		t.Errorf("the cut restore read %d of its checkpoint's %d bytes, want it to stop reading once cut", n, len(data))
	}
	if got := h.List(); len(got) != 0 {
		t.Errorf("executions after the cut restore: %+v, want none", got)
	}
}
