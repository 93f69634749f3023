package sftp

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"
)

// hostgate: change 23 (HOSTGATE.md). Small writes gather into whole
// batches, cut at the batch size; a large one goes out as it is, after
// what was gathered; nothing is written before a flush or a full batch.
func TestHostgateReplyBatch(t *testing.T) {
	var writes [][]byte
	b := &replyBatch{w: writeFunc(func(p []byte) (int, error) {
		writes = append(writes, p)
		return len(p), nil
	})}
	var want []byte
	reply := bytes.Repeat([]byte{'r'}, 32768+dataHeaderLen)
	for range 9 {
		if n, err := b.Write(reply); n != len(reply) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
		want = append(want, reply...)
	}
	if len(writes) != 1 || len(writes[0]) != replyBatchMax {
		t.Fatalf("9 replies of %d bytes made %d writes, want one full batch", len(reply), len(writes))
	}
	writes[0] = bytes.Clone(writes[0]) // the batch's buffer is reused
	large := bytes.Repeat([]byte{'L'}, replyBatchMax/2)
	if _, err := b.Write(large); err != nil {
		t.Fatal(err)
	}
	want = append(want, large...)
	if len(writes) != 3 || len(writes[1]) != 9*len(reply)-replyBatchMax || &writes[2][0] != &large[0] {
		t.Fatalf("a large write after a partial batch: writes of %d bytes; want the batch's rest, then the large write itself", lens(writes))
	}
	writes[1] = bytes.Clone(writes[1])
	if err := b.flush(); err != nil || len(writes) != 3 {
		t.Fatalf("a flush with nothing gathered wrote (%v)", err)
	}
	if _, err := b.Write([]byte("tail")); err != nil || len(writes) != 3 {
		t.Fatal("a small write went out before a flush")
	}
	if err := b.flush(); err != nil || len(writes) != 4 {
		t.Fatalf("flush: %v, %d writes", err, len(writes))
	}
	want = append(want, "tail"...)
	if got := bytes.Join(writes, nil); !bytes.Equal(got, want) {
		t.Fatal("the bytes written differ from those given, or their order")
	}
}

// The packet manager writes the replies ready at once as one batch: nine
// 32 KiB reads, the last eight answered while the connection was busy with
// the first, went out in three writes (the first reply, a full batch,
// the rest), not nine; the bytes are the nine replies in order.
func TestHostgateRepliesBatched(t *testing.T) {
	const size = 32768
	entered, release := make(chan struct{}), make(chan struct{})
	wrote := make(chan []byte, 16)
	first := true
	svr, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{strings.NewReader(""), writeFunc(func(p []byte) (int, error) {
		if first {
			first = false
			close(entered)
			<-release
		}
		wrote <- bytes.Clone(p)
		return len(p), nil
	})}, WithMaxTxPacket(size))
	if err != nil {
		t.Fatal(err)
	}
	defer svr.pktMgr.close()
	f := &readFile{data: bytes.Repeat([]byte("hostgate"), 9*size/8)}
	s := &replyServer{svr: svr, f: f, h: svr.nextHandle(f), size: size}
	s.read(1)
	<-entered
	for id := range uint32(8) {
		s.read(id + 2)
	}
	for deadline := time.Now().Add(10 * time.Second); len(svr.pktMgr.responses) < 8 || len(svr.pktMgr.requests) < 8; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the eight replies never waited together")
		}
	}
	close(release)
	reply := 4 + 1 + 4 + 4 + size
	var writes [][]byte
	for n := 0; n < 9*reply; {
		select {
		case p := <-wrote:
			writes = append(writes, p)
			n += len(p)
		case <-time.After(10 * time.Second):
			t.Fatalf("the replies never all went out: writes of %d bytes", lens(writes))
		}
	}
	if got := lens(writes); len(got) != 3 || got[0] != reply || got[1] != replyBatchMax {
		t.Fatalf("nine replies of %d bytes went out in writes of %d bytes; want the first, then a full batch of %d and the rest", reply, got, replyBatchMax)
	}
	all := bytes.Join(writes, nil)
	for id := uint32(1); id <= 9; id++ {
		p := all[:reply]
		all = all[reply:]
		if binary.BigEndian.Uint32(p) != uint32(reply-4) || p[4] != sshFxpData || binary.BigEndian.Uint32(p[5:]) != id {
			t.Fatalf("reply %d: header % x", id, p[:13])
		}
	}
}

func lens(bs [][]byte) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b))
	}
	return n
}
