package webterm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/gateway"
)

// pageMessages splits b into a page's messages: a byte whose low bit says
// text (control) or binary (input), two bytes of length, the payload.
func pageMessages(b []byte) (msgs []pageMsg) {
	for len(b) >= 3 {
		n := min(int(b[1])<<8|int(b[2]), len(b)-3)
		msgs = append(msgs, pageMsg{text: b[0]&1 == 1, data: b[3 : 3+n]})
		b = b[3+n:]
	}
	return msgs
}

type pageMsg struct {
	text bool
	data []byte
}

func pageFrames(ms ...pageMsg) []byte {
	var out []byte
	for _, m := range ms {
		var k byte
		if m.text {
			k = 1
		}
		out = append(out, k, byte(len(m.data)>>8), byte(len(m.data)))
		out = append(out, m.data...)
	}
	return out
}

// FuzzTerminalPage is a page of the gateway's terminal, with the gateway's
// configuration (cmd/gateway/web.go: terminals kept or not, the
// WebSocket handshake check, a Bind context, the handler's own message
// limits), sending whatever a hostile or broken page sends (input,
// control messages, acks, in any order), then leaving, closing its
// socket or dropping it, and, a terminal kept, coming back for it from
// an offset and a sequence number of the input's, to do it all again. Every message the page gets is output or a
// well-formed control message of a kind terminal.js knows; once the page
// has gone a terminal not kept has ended, its shell killed, and once the
// handler is closed no terminal runs.
func FuzzTerminalPage(f *testing.F) {
	input := pageMsg{data: []byte("ls -l\r")}
	f.Add(pageFrames(input, pageMsg{true, []byte(`{"type":"resize","cols":120,"rows":40}`)}, pageMsg{true, []byte(`{"type":"ack","bytes":6}`)}), "1", "", "80", "24", false, uint32(0), uint32(0))
	f.Add(pageFrames(pageMsg{true, []byte(`{"type":"ping"}`)}, input, input, pageMsg{true, []byte(`{"type":"ack","bytes":-5}`)}), ackPaced, "1", "", "", true, uint32(3), uint32(1))
	f.Add(pageFrames(pageMsg{true, []byte(`{"type":"ack","bytes":9223372036854775807}`)}, input), "1", "1", "0", "99999", false, uint32(1<<31), uint32(7))
	f.Add(pageFrames(pageMsg{data: []byte(strings.Repeat("y", 60000))}, pageMsg{data: []byte("exit 3")}), "", "", "", "", true, uint32(0), uint32(0))
	f.Add(pageFrames(pageMsg{true, []byte("not json")}, pageMsg{true, nil}, pageMsg{}), "1", "1", "1", "1", false, uint32(2), uint32(0))
	f.Fuzz(func(t *testing.T, in []byte, ack, keep, cols, rows string, drop bool, from, seq uint32) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		proc := newEcho()
		spawned := make(chan struct{}, 1)
		h := Handler(Config{
			Keep:      time.Minute, // `gateway serve --terminal-keep 1m`; off (its default) is keep=0's path
			Handshake: gateway.RequireWebSocket,
			Authorize: func(w http.ResponseWriter, r *http.Request, id string) (Caller, bool) {
				return Caller{ID: "tok-1", Name: "ci"}, true
			},
			Bind: func(ctx context.Context, r *http.Request, id string) (context.Context, func()) {
				c, cancel := context.WithCancelCause(ctx)
				return c, func() { cancel(errors.New("unbound")) }
			},
			Why: func(cause error) string { return "ended: " + cause.Error() },
			Spawn: func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
				select {
				case spawned <- struct{}{}:
				default:
					return nil, nil, errors.New("one shell a run")
				}
				stop := context.AfterFunc(ctx, func() { _ = proc.Kill(hostgate.SIGKILL) })
				return proc, func() { stop() }, nil
			},
		})
		// Each request is counted before its page's socket opens, so
		// before the page can have left.
		var reqs sync.WaitGroup
		served := func() <-chan struct{} {
			c := make(chan struct{})
			go func() { reqs.Wait(); close(c) }()
			return c
		}
		mux := http.NewServeMux()
		mux.Handle("GET /v1/hosts/{id}/pty", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reqs.Add(1)
			defer reqs.Done()
			h.ServeHTTP(w, r)
		}))
		srv := httptest.NewServer(mux)
		defer srv.Close()
		// page opens a page with query q, sends the input's messages, and
		// leaves; it returns the terminal's id, if the gateway kept it.
		page := func(q url.Values) (id string) {
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/hosts/local/pty?"+q.Encode(), nil)
			if err != nil {
				t.Fatalf("the page could not open its socket: %v", err)
			}
			defer ws.CloseNow()
			ws.SetReadLimit(-1)
			read := make(chan error, 1)
			told := make(chan string, 1) // the terminal's id, "" if none
			go func() {
				tell := func(id string) {
					select {
					case told <- id:
					default: // told already
					}
				}
				defer tell("")
				for {
					typ, b, err := ws.Read(ctx)
					if err != nil {
						read <- nil
						return
					}
					if typ == websocket.MessageBinary {
						continue
					}
					var c control
					if err := json.Unmarshal(b, &c); err != nil {
						read <- errors.New("text message that is no JSON: " + string(b))
						return
					}
					switch c.Type {
					case "session":
						tell(c.ID)
					case "starting", "error", "exit", "pong", "skipped", "inputwait", "inputdone":
					default:
						read <- errors.New("control message of a kind the page does not know: " + string(b))
						return
					}
				}
			}()
			if q.Get("keep") == "1" && q.Get("resume") == "" {
				// The id comes first, before any output: the page has it
				// before it could lose the socket.
				select {
				case id = <-told:
				case <-ctx.Done():
					t.Fatal("a kept terminal's page was not told its id within 20 s")
				}
			}
			for _, m := range pageMessages(in) {
				typ := websocket.MessageBinary
				if m.text {
					typ = websocket.MessageText
				}
				if ws.Write(ctx, typ, m.data) != nil {
					break // the terminal ended (exit), or the gateway closed
				}
			}
			if drop {
				_ = ws.CloseNow()
			} else {
				_ = ws.Close(websocket.StatusNormalClosure, "")
			}
			if err := <-read; err != nil {
				t.Fatal(err)
			}
			return id
		}
		q := url.Values{"ack": {ack}, "keep": {keep}, "cols": {cols}, "rows": {rows}}
		if id := page(q); id != "" {
			// The page comes back for its kept terminal, from where its
			// input says it had drawn to.
			q.Set("resume", id)
			q.Set("from", strconv.FormatUint(uint64(from), 10))
			q.Set("seq", strconv.FormatUint(uint64(seq), 10))
			page(q)
		}
		kept := keep == "1"
		if !kept {
			select {
			case <-served():
			case <-ctx.Done():
				t.Fatal("the terminal's request still running 20 s after its page left")
			}
			if st := h.Stats(); st.Open != 0 {
				t.Fatalf("the page left a terminal not kept, and %d still run", st.Open)
			}
		}
		h.Close()
		select {
		case <-served():
		case <-ctx.Done():
			t.Fatal("the terminal's request still running 20 s after its page left and the handler closed")
		}
		if st := h.Stats(); st.Open != 0 {
			t.Fatalf("the handler closed, and %d terminals still run", st.Open)
		}
		select {
		case <-spawned:
			select {
			case <-proc.done:
			case <-ctx.Done():
				t.Fatal("the terminal ended, its shell still runs 20 s on")
			}
		default:
			_ = proc.Kill(hostgate.SIGKILL) // never spawned: its goroutine ends here
		}
	})
}
