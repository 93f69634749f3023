package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/hostgate/hostgate/internal/bicopy"
)

// What tells the proxy that a direct session worked. Its probe proves
// that the server at the address holds the pinned key on the probe's own
// connection only: a machine there that forwards the probe to the host
// and answers ssh's connection itself (or closes it) passes the probe,
// and ssh then refuses the key it is shown. Nothing is trusted wrongly,
// but a direct path remembered as working was taken again by every run,
// each failing, until --relay-only.
//
// The signal is ssh's own SSH_MSG_NEWKEYS. Until it, ssh's side of the
// key exchange is in the clear (its version line, then packets with no
// cipher or MAC), and ssh sends it only after it has checked the host's
// key against known_hosts and the key's signature of the exchange
// (OpenSSH's kex_verify_host_key, then kex_send_newkeys; x/crypto's
// HostKeyCallback, then msgNewKeys): it is ssh saying the key was the
// host's, which neither the bytes' count nor the session's length says.
// A direct session that ends before ssh sent it (its host key check
// failed, the address closed the connection, ssh was stopped: its
// SIGHUP at exit) is remembered as a failed direct path, and the next
// runs take the relay for proxyDirectRetry. An ssh stopped during its key
// exchange (^C while connecting) costs only that.

// kexWatchLimit bounds what the proxy reads of ssh's stream looking for
// its NEWKEYS: a key exchange's packets are a few KiB (an ML-KEM or
// sntrup761 share is about 1.2 KiB).
const kexWatchLimit = 256 << 10

// kexVerdict is what watchKex saw of a direct session's key exchange.
type kexVerdict int

const (
	kexAccepted kexVerdict = iota // ssh sent NEWKEYS: it took the host's key
	kexUnknown                    // ssh's stream was not one the watch reads: no word either way
	kexEnded                      // the session ended before ssh's NEWKEYS
)

// joinDirect joins local (ssh) to conn, the host's direct listener, as
// bicopy.Copy does, and remembers in memo whether the session got past
// ssh's host key check (see above).
func joinDirect(ctx context.Context, local, conn net.Conn, memo directMemo, say func(string, ...any)) error {
	addr := conn.RemoteAddr().String()
	v, err := watchKex(ctx, local, conn)
	switch v {
	case kexEnded:
		why := fmt.Errorf("direct address %s: the session ended before ssh took the host's key (its host key check failed there, the address closed the connection, or ssh was stopped)", addr)
		memo.failed(why)
		say("%v; the next runs go through the gateway's relay", why)
		return err
	default:
		memo.worked()
	}
	// The rest by bicopy, which splices a pipe and a TCP conn: the watch
	// copied only the key exchange's few KiB.
	_, err = bicopy.Copy(ctx, local, conn)
	return err
}

// watchKex copies between local and conn, both ways, until ssh (local)
// has sent its NEWKEYS (kexAccepted) or its stream is not one it reads
// (kexUnknown): both are then open, and nothing read is left unwritten.
// When the session ends first, both are closed and the verdict is
// kexEnded, with the error that ended it (nil for an end of input).
func watchKex(ctx context.Context, local, conn net.Conn) (kexVerdict, error) {
	closeBoth := func() { _ = local.Close(); _ = conn.Close() }
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()

	// The host to ssh, until the read deadline set below stops it.
	hostDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				if _, werr := local.Write(buf[:n]); werr != nil {
					closeBoth()
					hostDone <- werr
					return
				}
			}
			switch {
			case err == nil:
				continue
			case errors.Is(err, os.ErrDeadlineExceeded):
			case errors.Is(err, io.EOF):
				// ssh reads the end and exits, which ends the read
				// below.
				if cw, ok := local.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
					closeBoth()
				}
			default:
				closeBoth()
			}
			hostDone <- err
			return
		}
	}()

	var (
		w       kexWatch
		verdict = kexEnded
		err     error
		buf     = make([]byte, 32<<10)
	)
read:
	for {
		n, rerr := local.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				err = werr
				break read
			}
			if v, done := w.feed(buf[:n]); done {
				verdict = v
				break read
			}
		}
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			break read
		}
	}
	if verdict == kexEnded {
		closeBoth()
		<-hostDone
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return kexEnded, err
	}
	_ = conn.SetReadDeadline(time.Unix(1, 0)) // long past: the read returns at once
	<-hostDone
	_ = conn.SetReadDeadline(time.Time{})
	// An end the host's side met meanwhile was passed on (CloseWrite) or
	// closed both: the copy after meets it again.
	return verdict, nil
}

// kexWatch reads ssh's side of an SSH connection (RFC 4253) as far as
// its SSH_MSG_NEWKEYS: the version line, then binary packets, each
// uint32 length, byte padding length, payload (whose first byte is the
// message number), padding; no MAC before NEWKEYS.
type kexWatch struct {
	seen    int    // bytes fed
	version bool   // the version line was read
	head    []byte // the packet's first 6 bytes, as they come
	skip    int    // bytes of the packet left to pass over
}

// sshMsgNewKeys is SSH_MSG_NEWKEYS.
const sshMsgNewKeys = 21

// feed reads p, the next of ssh's bytes. done is true once it has a
// verdict: kexAccepted at ssh's NEWKEYS, kexUnknown for a stream it does
// not read.
func (w *kexWatch) feed(p []byte) (v kexVerdict, done bool) {
	w.seen += len(p)
	if w.seen > kexWatchLimit {
		return kexUnknown, true
	}
	for len(p) > 0 {
		switch {
		case !w.version:
			// The version line: "SSH-2.0-…\r\n", at most 255 bytes.
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				i = len(p)
			}
			w.head = append(w.head, p[:i]...)
			if len(w.head) > 255 {
				return kexUnknown, true
			}
			if i == len(p) {
				return 0, false
			}
			if len(w.head) < 4 || string(w.head[:4]) != "SSH-" {
				return kexUnknown, true
			}
			w.version, w.head, p = true, w.head[:0], p[i+1:]
		case w.skip > 0:
			n := min(w.skip, len(p))
			w.skip, p = w.skip-n, p[n:]
		default:
			n := min(6-len(w.head), len(p))
			w.head, p = append(w.head, p[:n]...), p[n:]
			if len(w.head) < 6 {
				return 0, false
			}
			length := binary.BigEndian.Uint32(w.head)
			// At least the padding length, one message byte and 4 of
			// padding; at most what RFC 4253 has every side take.
			if length < 6 || length > 35000 {
				return kexUnknown, true
			}
			if w.head[5] == sshMsgNewKeys {
				return kexAccepted, true
			}
			w.skip, w.head = int(length)-2, w.head[:0]
		}
	}
	return 0, false
}
