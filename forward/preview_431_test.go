package forward

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/forward/internal/forwardtest"
)

// nodeLike answers as Node's HTTP server does (Vite, Next.js, any
// Express app): a request whose headers pass 16 KiB gets a bare 431, no
// body, and the connection closed; one with ?explain gets the dev
// server's own words.
func nodeLike(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	size := 0
	for k, vs := range req.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	switch {
	case size <= 16<<10:
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	case req.URL.RawQuery == "explain":
		io.WriteString(c, "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\nour own words\n")
	default:
		io.WriteString(c, "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
	}
}

// TestPreviewDevServer431IsExplained: a page load whose headers the dev
// server refuses as too large with a bare 431 (Node's, at 16 KiB, well
// under the gateway's 64 KiB: a preview origin's cookies grow past it)
// gets the preview's page saying so, how large the headers and the
// cookies in them were, and what to do. The browser showed its own
// "HTTP ERROR 431" and nothing else: no word of cookies, the host or the
// port. A dev server's 431 with words of its own, and one to a fetch,
// pass as they are.
func TestPreviewDevServer431IsExplained(t *testing.T) {
	ctx := testCtx(t)
	addr := forwardtest.Serve(t, nodeLike)
	port := int(echoPort(t, addr))
	e := newPreviewEnv(t, http.NotFoundHandler(), nil)
	url := fmt.Sprintf("%s/preview/dev/%d/", e.gw.URL, port)
	cookie := "session=" + strings.Repeat("x", 20<<10)
	page := func(query string, hdr ...string) (*http.Response, string) {
		return get(t, ctx, url+query, append([]string{"Cookie", cookie, "Accept", "text/html", "Sec-Fetch-Mode", "navigate"}, hdr...)...)
	}

	resp, body := page("")
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get(errorHeader) == "" ||
		!strings.Contains(body, fmt.Sprintf("port %d of host dev", port)) || !strings.Contains(body, "the cookies this browser keeps for this preview take 21 KiB") || !strings.Contains(body, "NODE_OPTIONS") {
		t.Errorf("a page load the dev server refused with a bare 431: %d %q", resp.StatusCode, body)
	}
	if resp, body := page("?explain"); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || body != "our own words\n" {
		t.Errorf("the dev server's own 431 page: %d %q, want its words", resp.StatusCode, body)
	}
	if resp, body := page("", "Sec-Fetch-Mode", "cors", "Accept", "*/*"); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || body != "" {
		t.Errorf("a fetch the dev server refused: %d %q, want its bare 431", resp.StatusCode, body)
	}
	if resp, body := get(t, ctx, url, "Accept", "text/html"); resp.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("a page load of small headers: %d %q", resp.StatusCode, body)
	}
}
