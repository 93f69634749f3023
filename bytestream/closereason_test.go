package bytestream

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// TestPeerClose: PeerClose is the close frame a Read met, whatever its
// status: a normal closure and going away read as io.EOF, and only
// PeerClose tells them apart and gives the reason (the gateway logs an
// agent that stops, 1001, as such); other statuses read as the
// *CloseError itself. A conn whose peer sent none has nil.
func TestPeerClose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		code    int
		reason  string
		readEOF bool
	}{
		{"normal", 1000, "", true},
		{"going away", StatusGoingAway, "agent stopping", true},
		{"policy", StatusPolicyViolation, "refused", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, dir := range []string{"dialed closes", "accepted closes"} {
				closer, reader := wsPair(t)
				if dir == "accepted closes" {
					reader, closer = closer, reader
				}
				if pc := PeerClose(reader); pc != nil {
					t.Fatalf("%s: PeerClose before any close: %v", dir, pc)
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					if tc.code == 1000 {
						_ = closer.Close()
					} else {
						_ = CloseWithReason(closer, tc.code, tc.reason)
					}
				}()
				_, err := reader.Read(make([]byte, 1))
				<-done
				var ce *CloseError
				switch {
				case tc.readEOF && err != io.EOF:
					t.Errorf("%s: Read after status %d: %v, want io.EOF", dir, tc.code, err)
				case !tc.readEOF && (!errors.As(err, &ce) || ce.Code != tc.code || ce.Reason != tc.reason):
					t.Errorf("%s: Read after status %d: %v, want its *CloseError", dir, tc.code, err)
				}
				if pc := PeerClose(reader); pc == nil || pc.Code != tc.code || pc.Reason != tc.reason {
					t.Errorf("%s: PeerClose after status %d %q: %v", dir, tc.code, tc.reason, pc)
				}
			}
		})
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if pc := PeerClose(a); pc != nil {
		t.Errorf("PeerClose of a pipe: %v", pc)
	}
}

// TestPeerCloseReasonPrintable: a peer's close reason reaches the caller
// as text that can be shown: `gateway proxy` prints the gateway's to
// ssh's terminal, and a ws:// path's close frame is anyone's to forge. Its
// escape sequences (a window title, a cleared screen), other control
// characters, bidi overrides and invalid UTF-8 arrive as U+FFFD; the
// words around them as sent.
func TestPeerCloseReasonPrintable(t *testing.T) {
	closer, reader := wsPair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = CloseWithReason(closer, StatusPolicyViolation, "\x1b]0;pwned\x07\x1b[2Jtoken \u202erevoked\xff\r\n")
	}()
	_, err := reader.Read(make([]byte, 1))
	<-done
	var ce *CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("Read: %v, want a *CloseError", err)
	}
	const want = "\uFFFD]0;pwned\uFFFD\uFFFD[2Jtoken \uFFFDrevoked\uFFFD\uFFFD\uFFFD"
	if ce.Reason != want || PeerClose(reader).Reason != want {
		t.Fatalf("reason %q (PeerClose %q), want %q", ce.Reason, PeerClose(reader).Reason, want)
	}
	if !strings.Contains(ce.Error(), want) {
		t.Fatalf("Error() %q does not say the reason", ce.Error())
	}
}

// TestHandshakeErrorTextPrintable: a refused upgrade's error shows the
// server's body as one printable line (`gateway proxy` prints it to ssh's
// terminal, the agent logs it; on a ws:// path, or behind a captive
// portal, the answer is anyone's): line breaks and tabs as spaces, other
// controls as U+FFFD. Body itself stays as the server sent it, for the
// callers that parse it.
func TestHandshakeErrorTextPrintable(t *testing.T) {
	const body = "\x1b]0;pwned\x07\x1b[2Jno\r\nsuch\thost\u202e"
	he := &HandshakeError{StatusCode: 502, Body: body}
	const want = "bytestream: websocket handshake: status 502: \uFFFD]0;pwned\uFFFD\uFFFD[2Jno  such host\uFFFD"
	if he.Error() != want {
		t.Fatalf("Error() = %q, want %q", he.Error(), want)
	}
	if he.Body != body {
		t.Fatalf("Body changed to %q", he.Body)
	}
}
