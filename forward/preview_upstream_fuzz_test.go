package forward

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzPreviewUpstream is the preview proxy, configured as the gateway
// configures it (cmd/gateway/web.go: a preview domain, the default
// navigation timeout and pools, a HostLost that finds the host there), in
// front of a dev server that answers a request with whatever the input
// holds, as a hostile app or host may, and then hangs up. Through either
// form and as a page load or a fetch, the viewer gets an answer with a
// status line; the dev server neither sets nor clears the gateway's cookies
// (nor any through a 1xx response), nor sets one beyond its preview (a
// Domain; in the path form a Path outside the prefix), nor sends a redirect
// out of the path form's prefix; and once the proxy is closed every
// connection to the dev server has ended.
func FuzzPreviewUpstream(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSet-Cookie: a=1; Domain=preview.localhost; Path=/\r\n\r\nhi"), false, false)
	f.Add([]byte("HTTP/1.1 302 Found\r\nLocation: /login\r\nSet-Cookie: hostgate_session=x\r\nClear-Site-Data: \"cookies\"\r\nContent-Length: 0\r\n\r\n"), true, true)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5\r\nhello\r\n"), true, false)
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x02hi"), false, true)
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"), true, true)
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nSet-Cookie: hostgate_session=x\r\nClear-Site-Data: \"cookies\"\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), false, false)
	f.Add([]byte("SSH-2.0-OpenSSH_9.6\r\n"), false, false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"), true, false)
	f.Fuzz(func(t *testing.T, answer []byte, pathForm, pageLoad bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var upstreams sync.WaitGroup
		dial := func(ctx context.Context, hostID string, port int) (net.Conn, error) {
			if hostID != "dev" {
				return nil, fmt.Errorf("host %s: %w", hostID, ErrUnknownHost)
			}
			gw, dev := net.Pipe()
			upstreams.Add(2)
			asked := make(chan struct{})
			go func() {
				defer upstreams.Done()
				// The answer waits for the request's head: written at
				// once, and the pipe closed, the proxy's write of the
				// request failed ("read/write on closed pipe") before it
				// read the answer, and nearly every input was a 502
				// that none of the checks below looked into.
				_ = dev.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, _ = http.ReadRequest(bufio.NewReader(dev))
				close(asked)
				_ = dev.SetReadDeadline(time.Time{})
				_, _ = io.Copy(io.Discard, dev)
			}()
			go func() {
				defer upstreams.Done()
				<-asked
				_ = dev.SetWriteDeadline(time.Now().Add(10 * time.Second))
				_, _ = dev.Write(answer)
				_ = dev.Close()
			}()
			return gw, nil
		}
		p, err := NewPreview(dial, &PreviewConfig{
			Domain:    testDomain,
			Authorize: allowAll,
			HostLost:  func(context.Context, string) error { return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(p)
		var req *http.Request
		prefix := ""
		if pathForm {
			prefix = "/preview/dev/3000"
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+prefix+"/app/", nil)
		} else {
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+"/app/", nil)
			_, port, _ := net.SplitHostPort(gw.Listener.Addr().String())
			req.Host = SubdomainHost("dev", 3000, testDomain) + ":" + port
		}
		if err != nil {
			t.Fatal(err)
		}
		if pageLoad {
			req.Header.Set("Sec-Fetch-Mode", "navigate")
			req.Header.Set("Accept", "text/html")
		}
		var interimMu sync.Mutex
		var interim []http.Header // the 1xx responses the viewer got
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
				interimMu.Lock()
				defer interimMu.Unlock()
				interim = append(interim, http.Header(h).Clone())
				return nil
			},
		}))
		// The transport alone: a client reads a redirect's Location, and
		// failed on one that does not parse, which the viewer still got.
		resp, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(req)
		switch {
		case err == nil:
			checkAnswer(t, resp, pathForm, prefix)
		case !brokeOffBeforeBody(answer):
			t.Fatalf("the viewer got no answer: %v", err)
		}
		interimMu.Lock()
		for _, h := range interim {
			if sc, csd := h.Values("Set-Cookie"), h.Get("Clear-Site-Data"); len(sc) != 0 || csd != "" {
				t.Fatalf("a 1xx of the dev server reached the viewer with Set-Cookie %q, Clear-Site-Data %q", sc, csd)
			}
		}
		interimMu.Unlock()
		gw.Close()
		p.Close()
		done := make(chan struct{})
		go func() { upstreams.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("a connection to the dev server still open 20 s after the proxy closed")
		}
	})
}

// checkAnswer is FuzzPreviewUpstream's look at the answer the viewer got.
func checkAnswer(t *testing.T, resp *http.Response, pathForm bool, prefix string) {
	t.Helper()
	_, _ = io.Copy(io.Discard, resp.Body) // may break off with the dev server's body
	_ = resp.Body.Close()
	for _, l := range resp.Header.Values("Set-Cookie") {
		// As a browser reads it, which takes more than net/http parses.
		c := browserReads(l)
		switch {
		case c.name == "hostgate_session" || c.name == "hostgate_preview":
			t.Fatalf("the dev server set the gateway's cookie: %q", l)
		case c.domain:
			t.Fatalf("the dev server set a cookie beyond its preview: %q", l)
		case pathForm && !underPrefix(c.path, prefix):
			t.Fatalf("the dev server set a cookie outside the preview's path %s: %q", prefix, l)
		}
	}
	if resp.Header.Get("Clear-Site-Data") != "" {
		t.Fatalf("the dev server's Clear-Site-Data reached the viewer: %q", resp.Header.Get("Clear-Site-Data"))
	}
	if loc := resp.Header.Get("Location"); pathForm && resp.StatusCode/100 == 3 &&
		strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") && !strings.HasPrefix(loc, "/\\") && !underPrefix(loc, prefix) {
		t.Fatalf("a redirect out of the preview's path %s: %q", prefix, loc)
	}
}

// brokeOffBeforeBody reports whether answer's final response promises a
// body and hangs up before its first byte. The viewer then gets no answer
// at all, a known gap left for now: ReverseProxy has written the dev
// server's headers into the server's buffer, which goes out with the
// first body byte (one write for a small page), and aborts the request
// when the body breaks off, its headers unsent; a 502 then would need the
// headers held back, at a write per response.
func brokeOffBeforeBody(answer []byte) bool {
	br := bufio.NewReader(bytes.NewReader(answer))
	for {
		r, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
		if err != nil {
			return false
		}
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		n, err := r.Body.Read(make([]byte, 1))
		return n == 0 && err != nil && err != io.EOF
	}
}
