package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/hostgate/hostgate/forward"
)

// TestPreviewUploadOutlivesAPausingDevServer: an upload through a preview
// to a dev server that stops reading it for longer than bodyTimeout (a
// Next.js API route compiled on its first request, a handler stopped at a
// breakpoint) arrives whole once the dev server reads on. The client sent
// all along, but the idle bound ran from the last read that brought
// bytes, and the proxy, held back by the dev server, read nothing: the
// read after the pause failed, and the upload with it.
func TestPreviewUploadOutlivesAPausingDevServer(t *testing.T) {
	shortBodyTimeout(t, 200*time.Millisecond)
	e := newEnv(t, nil)
	const total = 64 << 20
	dev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.CopyN(h, r.Body, 64<<10)
		if err == nil {
			time.Sleep(5 * bodyTimeout) // the dev server busy elsewhere
			var m int64
			m, err = io.Copy(h, r.Body)
			n += m
		}
		if err != nil {
			http.Error(w, "the dev server's read: "+err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}))
	t.Cleanup(dev.Close)
	p, err := forward.NewPreview(func(ctx context.Context, _ string, port int) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}, &forward.PreviewConfig{Authorize: func(*http.Request, string, int) (bool, string, error) { return true, "", nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	e.srv.Mux().Handle("/preview/", p)

	body := make([]byte, total)
	for i := range body {
		body[i] = byte(i * 7)
	}
	_, port, _ := net.SplitHostPort(dev.Listener.Addr().String())
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPut, e.ts.URL+"/preview/dev/"+port+"/upload", &onlyReader{body: body})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = total
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("the upload: %v", err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("%d %x", total, sha256.Sum256(body)); resp.StatusCode != http.StatusOK || string(got) != want {
		t.Fatalf("the upload: %d %q, want 200 %q", resp.StatusCode, got, want)
	}
}

// onlyReader hides bytes.Reader's WriterTo and Len, so the body goes out
// as a client streams a file.
type onlyReader struct {
	body []byte
	off  int
}

func (r *onlyReader) Read(p []byte) (int, error) {
	if r.off == len(r.body) {
		return 0, io.EOF
	}
	n := copy(p, r.body[r.off:])
	r.off += n
	return n, nil
}
