package forward

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestPreviewOutlivesDevServerKeepAlive: Node's HTTP server (Vite,
// Next.js, Express) and uvicorn close a keep-alive connection idle for 5
// s. A request the proxy sends on such a connection as the dev server
// closes it is lost; net/http retries a GET, but not a form's POST, which
// got a 502 saying the port answered "not with an HTTP response". The
// stand-in closes a connection idle 5 s the moment the next request
// arrives, the worst that race does: a POST 5 s after the last answer
// must still get the dev server's.
func TestPreviewOutlivesDevServerKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const devKeepAlive = 5 * time.Second
		dials := 0
		dial := func(ctx context.Context, hostID string, port int) (net.Conn, error) {
			dials++
			c, s := net.Pipe()
			go func() {
				defer s.Close()
				br := bufio.NewReader(s)
				last := time.Now()
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if time.Since(last) >= devKeepAlive {
						return // closed as the request came
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\n\r\nok"); err != nil {
						return
					}
					last = time.Now()
				}
			}()
			return c, nil
		}
		p, err := NewPreview(dial, &PreviewConfig{Authorize: allowAll})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		send := func(method string) *httptest.ResponseRecorder {
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader("name=x")
			}
			r := httptest.NewRequest(method, "http://gw.example/preview/dev/3000/form", body)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			return w
		}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			if w := send(http.MethodGet); w.Code != http.StatusOK {
				t.Fatalf("first GET: %d %s", w.Code, w.Body)
			}
			time.Sleep(devKeepAlive)
			if w := send(method); w.Code != http.StatusOK || w.Body.String() != "ok" {
				t.Errorf("%s %v after the last answer, as the dev server closes the connection: %d %s", method, devKeepAlive, w.Code, w.Body)
			}
		}
		p.Close()
		synctest.Wait()
	})
}
