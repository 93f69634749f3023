package webterm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
)

// FuzzDim: the terminal's size from the query is the number asked when it
// is one from 1 to 1000, else the default; never out of that range.
func FuzzDim(f *testing.F) {
	for _, s := range []string{"80", "0", "-1", "1000", "1001", "", "24x", "+5", "007", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := dim(s, 80)
		if got < 1 || got > 1000 {
			t.Fatalf("dim(%q) = %d", s, got)
		}
		if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= 1000 && got != n {
			t.Fatalf("dim(%q) = %d, asked %d", s, got, n)
		}
	})
}

// FuzzOriginOK: with no patterns, only the gateway's own origin (or none)
// opens the socket; and whatever originOK lets through, coder/websocket's
// own origin check (which Accept runs after Authorize) lets through too, so
// an allowed page never meets a bare 403 after authenticating.
func FuzzOriginOK(f *testing.F) {
	for _, o := range []string{"", "https://gw.example", "https://GW.example", "https://evil.example", "null",
		"https://gw.example.evil.example", "https://gw.example@evil.example", "https://x.app.example", "http://[::1]:80", "gw.example", "https://gw.example:8443", "%zz"} {
		f.Add(o, "gw.example", "*.app.example")
	}
	f.Add("https://gw.example:8443", "gw.example:8443", "")
	f.Add("https://a", "a", "[")
	f.Fuzz(func(t *testing.T, origin, host, pattern string) {
		r := httptest.NewRequest("GET", "/v1/hosts/h/pty", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		plain := &Terminals{}
		if plain.originOK(r) && origin != "" {
			if u, err := url.Parse(origin); err != nil || u.Host == "" || !strings.EqualFold(u.Host, host) {
				t.Fatalf("origin %q opens the terminal of %q with no patterns", origin, host)
			}
		}
		h := &Terminals{cfg: Config{OriginPatterns: []string{pattern}}}
		if strings.Contains(pattern, "://") {
			// coder/websocket matches such a pattern against scheme://host,
			// originOK against the host alone, so it refuses what Accept
			// would allow; the gateway sets no patterns.
			h.cfg.OriginPatterns = nil
		}
		if !h.originOK(r) {
			return
		}
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		w := httptest.NewRecorder()
		if _, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: h.cfg.OriginPatterns}); w.Code == http.StatusForbidden {
			t.Fatalf("origin %q allowed for %q (patterns %q), Accept refuses: %v", origin, host, h.cfg.OriginPatterns, err)
		}
	})
}

// resizeRecorder is a Process that records resizes; nothing else is used.
type resizeRecorder struct {
	hostgate.Process
	sizes [][2]int
}

func (p *resizeRecorder) Resize(c, r int) error {
	p.sizes = append(p.sizes, [2]int{c, r})
	return nil
}

// FuzzControl: a control message resizes the terminal only to a size of
// 1 to 1000 each way, and only as asked; an ack moves what the page has
// drawn only forward and never past what was sent.
func FuzzControl(f *testing.F) {
	for _, m := range []string{`{"type":"resize","cols":120,"rows":40}`, `{"type":"resize","cols":0,"rows":40}`,
		`{"type":"resize","cols":1001,"rows":1}`, `{"type":"resize","cols":1e3,"rows":2}`, `{"type":"ack","bytes":4096}`,
		`{"type":"ack","bytes":-1}`, `{"type":"ack","bytes":9223372036854775807}`, `{"TYPE":"Resize","Cols":5,"Rows":5}`,
		`{"type":"exit","code":1}`, `not json`, `{"type":"resize","cols":"80"}`} {
		f.Add([]byte(m), int64(1<<20))
	}
	f.Fuzz(func(t *testing.T, b []byte, sent int64) {
		p := &resizeRecorder{}
		fl := newFlow()
		fl.sent, fl.acked = max(sent, 0), max(sent, 0)/2
		before := fl.acked
		applyControl(b, p, fl)
		for _, s := range p.sizes {
			if s[0] < 1 || s[0] > 1000 || s[1] < 1 || s[1] > 1000 {
				t.Fatalf("%s resized to %v", b, s)
			}
		}
		if len(p.sizes) > 1 {
			t.Fatalf("one message, %d resizes", len(p.sizes))
		}
		if fl.acked < before || fl.acked > fl.sent {
			t.Fatalf("%s moved the ack from %d to %d (sent %d)", b, before, fl.acked, fl.sent)
		}
		if fl.acked != before && !fl.acking {
			t.Fatal("an ack that did not turn flow control on")
		}
	})
}

// FuzzReadMessage sends the terminal's reader a message of size bytes
// (from data, written in pieces of len(data)+1 bytes, so in several
// frames), then "next": a message of up to MaxMessage bytes arrives
// whole, a larger one is dropped with errTooBig, and the socket goes on.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte("ls -l\r"), uint32(6), false)
	f.Add([]byte(`{"type":"resize","cols":80,"rows":24}`), uint32(37), true)
	f.Add([]byte("x"), uint32(MaxMessage), false)
	f.Add([]byte("paste"), uint32(MaxMessage+1), false)
	f.Add([]byte{0}, uint32(0), false)
	conns := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(-1)
		conns <- ws
	}))
	defer srv.Close()
	ctx := context.Background()
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer client.CloseNow()
	server := <-conns
	defer server.CloseNow()
	buf := make([]byte, MaxMessage+1)
	f.Fuzz(func(t *testing.T, data []byte, size uint32, text bool) {
		n := int(size % (2*MaxMessage + 2))
		msg := bytes.Repeat(append(data, 0), n/(len(data)+1)+1)[:n]
		typ := websocket.MessageBinary
		if text {
			typ = websocket.MessageText
		}
		sent := make(chan error, 1)
		go func() {
			w, err := client.Writer(ctx, typ)
			if err != nil {
				sent <- err
				return
			}
			for rest := msg; len(rest) > 0; {
				k := min(len(data)+1, len(rest))
				if _, err := w.Write(rest[:k]); err != nil {
					sent <- err
					return
				}
				rest = rest[k:]
			}
			if err := w.Close(); err != nil {
				sent <- err
				return
			}
			sent <- client.Write(ctx, websocket.MessageBinary, []byte("next"))
		}()
		gotTyp, got, err := readMessage(ctx, server, buf)
		switch {
		case n > MaxMessage:
			if !errors.Is(err, errTooBig) {
				t.Fatalf("a message of %d bytes: %v, want errTooBig", n, err)
			}
		case err != nil || gotTyp != typ || !bytes.Equal(got, msg):
			t.Fatalf("a message of %d bytes read as %d bytes of type %v (%v)", n, len(got), gotTyp, err)
		}
		if _, got, err := readMessage(ctx, server, buf); err != nil || string(got) != "next" {
			t.Fatalf("after a message of %d bytes: %q, %v", n, got, err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzEnding: what the page is told of a terminal's end, made of a
// host's words (an exit signal's name, a lost connection's error, which
// carries the host's disconnect message) or a cause from outside, is a
// control message of a kind terminal.js knows, valid JSON whatever bytes
// those words hold, and a close reason a browser takes (valid UTF-8, at
// most 123 bytes: else it fails the socket, and the page resumes to be
// told the same ending again).
func FuzzEnding(f *testing.F) {
	f.Add(0, "", "", uint8(0))
	f.Add(-1, "KILL", "", uint8(0))
	f.Add(1, "", "ssh: disconnect, reason 11: bye \xff\xfe", uint8(1))
	f.Add(0, strings.Repeat("\xe9", 300), "\x1b]0;x\x07\"}", uint8(2))
	f.Add(7, "\x00\"", "terminal closed: "+strings.Repeat("é", 80), uint8(3))
	f.Fuzz(func(t *testing.T, code int, signal, text string, how uint8) {
		var werr error
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		why := func(cause error) string { return "ended: " + cause.Error() }
		switch how % 4 {
		case 0: // the shell exited, or a signal ended it
			werr = &hostgate.ExitError{Code: code, Signal: hostgate.Signal(signal)}
		case 1: // its end went unseen: the connection was lost
			werr = errors.New(text)
		case 2: // ended from outside (a revoked token, the idle timer)
			cancel(errors.New(text))
			werr = errors.New("killed")
		case 3: // ended by the page's going
			cancel(nil)
			why = nil
		}
		end := endingOf(ctx, werr, why)
		if !utf8.ValidString(end.reason) || len(end.reason) > 123 {
			t.Fatalf("close reason %q (%d bytes): want valid UTF-8 of at most 123 bytes", end.reason, len(end.reason))
		}
		if end.msg == nil {
			return
		}
		var c control
		if err := json.Unmarshal(end.msg, &c); err != nil {
			t.Fatalf("ending %q: %v", end.msg, err)
		}
		switch c.Type {
		case "exit":
			if c.Code == nil {
				t.Fatalf("exit without a code: %s", end.msg)
			}
		case "error":
			if c.Message == "" {
				t.Fatalf("error without a message: %s", end.msg)
			}
		default:
			t.Fatalf("ending of a kind the page does not know: %s", end.msg)
		}
	})
}
