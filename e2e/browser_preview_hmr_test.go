package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestBrowserPreviewHMR: a dev server's hot-reload socket (Vite's
// "vite-hmr" subprotocol) through the subdomain preview, in Chromium
// (previewhmr.mjs): it opens with its subprotocol, carries the server's
// pushes and the page's messages both ways (a 1 MiB one too), a close the
// page starts reaches the dev server with its code and reason, and when
// the dev server ends (its process gone: the connections drop without a
// close frame) the page's socket closes within seconds, which is what
// Vite's client waits for to poll for the restarted server. It polls as
// Vite does, by opening sockets of the "vite-ping" subprotocol: none opens
// while the dev server is down, and one does once it is back on its port.
func TestBrowserPreviewHMR(t *testing.T) {
	d := startDev(t)
	dev := newHMRDev(t)
	preview := "http://" + strconv.Itoa(dev.port) + "--local.localhost:" + d.port + "/"
	runBrowserSteps(t, "previewhmr.mjs", func(what string) {
		switch what {
		case "end dev server":
			dev.end()
		case "restart dev server":
			dev.start(t)
		case "closes seen":
			dev.mu.Lock()
			defer dev.mu.Unlock()
			if len(dev.closes) == 0 || dev.closes[0] != "1000 page leaves" {
				t.Errorf("the dev server saw the page's close as %q, want 1000 page leaves", dev.closes)
			}
		default:
			t.Fatalf("previewhmr.mjs asks for %q", what)
		}
	}, "HOSTGATE_URL="+d.url, "HOSTGATE_TOKEN="+d.admin, "HOSTGATE_PREVIEW_URL="+preview)
}

// hmrDev is a dev server with a hot-reload socket at /hmr: it greets with
// {"type":"connected"} as Vite does, answers each text message with
// "echo:" and its length, and pushes {"type":"update"} after the first.
type hmrDev struct {
	port  int
	mux   *http.ServeMux
	mu    sync.Mutex
	srv   *http.Server
	conns []*websocket.Conn
	// closes are the close statuses the page's sockets ended with, as the
	// dev server read them ("1000 reason").
	closes []string
}

func newHMRDev(t testing.TB) *hmrDev {
	d := &hmrDev{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>hmr dev server</title><h1 id="title">hmr dev server</h1>
<script>
window.hmr = [];
window.openHMR = (name) => {
  const s = { name, protocol: "", got: [], closed: null };
  hmr.push(s);
  const ws = new WebSocket("ws://" + location.host + "/hmr", "vite-hmr");
  s.ws = ws;
  ws.onopen = () => { s.protocol = ws.protocol; };
  ws.onmessage = (e) => {
    s.got.push(e.data.length > 100 ? "long:" + e.data.length : e.data);
    if (e.data === '{"type":"connected"}') { ws.send("hello"); ws.send("x".repeat(1 << 20)); }
  };
  ws.onclose = (e) => { s.closed = { code: e.code, reason: e.reason, clean: e.wasClean, at: Date.now() }; };
};
</script>`)
	})
	mux.HandleFunc("/hmr", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"vite-hmr", "vite-ping"}})
		if err != nil {
			return
		}
		if c.Subprotocol() == "vite-ping" {
			_ = c.Close(websocket.StatusNormalClosure, "")
			return
		}
		c.SetReadLimit(2 << 20)
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
		ctx := context.Background()
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"connected"}`))
		for n := 0; ; n++ {
			_, b, err := c.Read(ctx)
			if err != nil {
				if s := websocket.CloseStatus(err); s != -1 {
					var ce websocket.CloseError
					_ = errors.As(err, &ce)
					d.mu.Lock()
					d.closes = append(d.closes, strconv.Itoa(int(s))+" "+ce.Reason)
					d.mu.Unlock()
				}
				return
			}
			_ = c.Write(ctx, websocket.MessageText, []byte("echo:"+strconv.Itoa(len(b))))
			if n == 0 {
				_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"update"}`))
			}
		}
	})
	d.mux = mux
	d.start(t)
	t.Cleanup(d.end)
	return d
}

// start serves on d.port, or on a new port the first time.
func (d *hmrDev) start(t testing.TB) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)))
	if err != nil {
		t.Fatal(err)
	}
	d.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: d.mux, ReadHeaderTimeout: 10 * time.Second}
	d.mu.Lock()
	d.srv = srv
	d.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// end stops the dev server as its process ending would: the listener
// closes and every socket drops, without a close frame.
func (d *hmrDev) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	_ = d.srv.Close()
	for _, c := range d.conns {
		_ = c.CloseNow()
	}
	d.conns = nil
}
