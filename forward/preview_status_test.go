package forward

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPreviewStatusBelow100Is502: a dev server answering a status HTTP
// has not (000-099, which net/http's client takes) gets the viewer the
// preview's 502 saying what came. ReverseProxy passed it to WriteHeader,
// whose panic net/http's server caught: the viewer's connection ended with
// no answer and the gateway's log got a stack per request (found by
// FuzzPreviewUpstream).
func TestPreviewStatusBelow100Is502(t *testing.T) {
	ctx := testCtx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n")
		}
	}()
	p, err := NewPreview(loopDial, &PreviewConfig{Authorize: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(p)
	defer func() { gw.Close(); p.Close(); <-served }()
	resp, body := get(t, ctx, fmt.Sprintf("%s/preview/dev/%d/", gw.URL, echoPort(t, ln.Addr().String())))
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "upstream_bad_response") || !strings.Contains(body, "status 000") {
		t.Fatalf("%d %s; want 502 upstream_bad_response naming status 000", resp.StatusCode, body)
	}
}
