package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listerServer is a fake SFTP server whose directory listings come from
// names: each READDIR is answered with the names it returns for the
// listing's i-th reply, without end until the client has been sent
// stopAfter names, when it says EOF (so that a client without a bound
// ends too, with everything it was sent).
type listerServer struct {
	names     func(i int) []string
	stopAfter int
	sent      int
	closes    atomic.Int32
}

func listerPipe(t *testing.T, s *listerServer) *Client {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve(sr, sw)
	}()
	c, err := NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cr.Close()
		_ = sw.Close()
		_ = c.Close()
		<-served
	})
	return c
}

func (s *listerServer) serve(r io.Reader, w io.Writer) {
	replies := 0
	for {
		typ, data, err := recvPacket(r, nil, 0, nil)
		if err != nil {
			return
		}
		if typ == sshFxpInit {
			_, _ = w.Write(reply(sshFxpVersion, sftpProtocolVersion, nil))
			continue
		}
		id, _ := unmarshalUint32(data)
		var out []byte
		switch typ {
		case sshFxpOpendir:
			out = reply(sshFxpHandle, id, marshalString(nil, "d"))
		case sshFxpReaddir:
			if s.sent >= s.stopAfter {
				out = reply(sshFxpStatus, id, statusBody(sshFxEOF))
				break
			}
			names := s.names(replies)
			replies++
			s.sent += max(len(names), 1)
			body := marshalUint32(nil, uint32(len(names)))
			for _, n := range names {
				body = marshalString(body, n)
				body = marshalString(body, "")
				body = marshalUint32(body, 0) // no attributes
			}
			out = reply(sshFxpName, id, body)
		case sshFxpClose:
			s.closes.Add(1)
			out = reply(sshFxpStatus, id, statusBody(sshFxOk))
		default:
			out = reply(sshFxpStatus, id, statusBody(sshFxOPUnsupported))
		}
		if _, err := w.Write(out); err != nil {
			return
		}
	}
}

// hostgate: change 36. A listing that never ends, of new names, of "."
// and ".." over again, of empty replies or of long names, fails ReadDir
// with an error naming the directory and the bound it went past, and
// the directory's handle is closed; one within the bounds is read whole.
// Without the bounds ReadDir took all the server sent (here ten times
// the bound, where the fake server stops; a real one need not).
func TestHostgateReadDirBounded(t *testing.T) {
	defer func(e, b int) { maxReadDirEntries, maxReadDirBytes = e, b }(maxReadDirEntries, maxReadDirBytes)
	maxReadDirEntries, maxReadDirBytes = 10_000, 1<<20

	numbered := func(i int) []string {
		names := make([]string, 100)
		for j := range names {
			names[j] = fmt.Sprintf("f%d", i*100+j)
		}
		return names
	}
	long := func(i int) []string {
		return []string{fmt.Sprintf("%d%s", i, strings.Repeat("n", 200<<10))}
	}
	for _, tc := range []struct {
		name      string
		names     func(int) []string
		stopAfter int
		want      string // in the error; "" for none
		entries   int
	}{
		{"new names", numbered, 100_000, "more than 10000 entries", 0},
		{"dots", func(int) []string { return []string{".", ".."} }, 100_000, "more than 10000 entries", 0},
		{"empty replies", func(int) []string { return nil }, 100_000, "more than 10000 entries", 0},
		{"long names", long, 50, "more than 1 MiB", 0},
		{"within the bounds", numbered, 9_000, "", 9_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &listerServer{names: tc.names, stopAfter: tc.stopAfter}
			c := listerPipe(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ents, err := c.ReadDirContext(ctx, "/endless")
			if tc.want == "" {
				if err != nil || len(ents) != tc.entries {
					t.Fatalf("ReadDir: %d entries, %v; want %d", len(ents), err, tc.entries)
				}
			} else if !errors.Is(err, ErrReadDirTooLarge) || !strings.Contains(err.Error(), "/endless") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadDir: %d entries, %v; want an error naming /endless and %q", len(ents), err, tc.want)
			}
			if n := s.closes.Load(); n != 1 {
				t.Errorf("the directory's handle closed %d times; want once", n)
			}
		})
	}
}

// hostgate: change 38. ReadDirProgress calls progress once for each page
// of the listing, and reads it whole as ReadDirContext does.
func TestHostgateReadDirProgress(t *testing.T) {
	s := &listerServer{names: func(i int) []string {
		return []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)}
	}, stopAfter: 10}
	c := listerPipe(t, s)
	pages := 0
	ents, err := c.ReadDirProgress(context.Background(), "/d", func() { pages++ })
	if err != nil || len(ents) != 10 {
		t.Fatalf("ReadDirProgress: %d entries, %v; want 10", len(ents), err)
	}
	if pages != 5 {
		t.Errorf("progress called %d times; want 5, once a page", pages)
	}
}
