package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestBrowserPreviewPages opens, in Chromium, each page the preview answers
// a browser with when it cannot serve a preview, in the dark and the light
// scheme (previewpages.mjs): a path that is no preview, a host that does
// not exist, a port nothing listens on, a port that answers something
// other than HTTP, a host whose agent is not connected, and a login
// ticket missing or refused on a preview origin, and, logged in with a
// token for host box alone, a preview of another host, and, seen by a
// viewer with no token, a public share's port nothing listens on. The 504 of a hung dev
// server is TestBrowserPreviewHungDevServer's.
func TestBrowserPreviewPages(t *testing.T) {
	g := startGateway(t, "", "--preview-domain", "localhost")
	g.startAgent("box", "")
	g.startAgent("gone", "").stop()
	g.waitConnected("gone", false, 30*time.Second)

	// Refused on 127.0.0.1 and ::1, where the agent dials localhost, for
	// the whole test: a port closed once may be another server's by the
	// time the browser asks.
	closed, shared := testenv.RefusedLocalhostPort(t), testenv.RefusedLocalhostPort(t)
	if status, b := g.api("POST", "/v1/hosts/box/shares", g.admin, map[string]any{"port": shared, "ttlSeconds": 600}); status != http.StatusCreated {
		t.Fatalf("share: %d %s", status, b)
	}
	garbage := notHTTP(t)
	_, gwPort, _ := net.SplitHostPort(g.url[len("http://"):])
	auth := "http://3000--box.localhost:" + gwPort + "/.hostgate/auth"
	kinds := [][]any{
		{"no-preview", g.url + "/preview/box/notaport/", 404, "No preview here."},
		{"no-host", g.url + "/preview/nobody/3000/", 404, "There is no host nobody."},
		{"nothing-listens", g.url + "/preview/box/" + strconv.Itoa(closed) + "/", 502, "Nothing answered on port " + strconv.Itoa(closed) + " of host box."},
		{"not-http", g.url + "/preview/box/" + strconv.Itoa(garbage) + "/", 502, "answered, but not with an HTTP response"},
		{"host-offline", g.url + "/preview/gone/3000/", 503, "Host gone is not connected."},
		{"no-ticket", auth, 400, "Missing or oversized ticket."},
		{"bad-ticket", auth + "?ticket=bogus", 401, "This login link is invalid or expired."},
		// A viewer with no token, let in by a public share alone.
		{"shared-nothing-listens", "http://" + strconv.Itoa(shared) + "--box.localhost:" + gwPort + "/", 502, "Nothing answered on port " + strconv.Itoa(shared) + " of host box.", "shared"},
		// Last: it logs the browser in with that token.
		{"other-host", "http://3000--gone.localhost:" + gwPort + "/", 403, "Your token cannot reach host gone.", g.token("client", "box")},
	}
	b, err := json.Marshal(kinds)
	if err != nil {
		t.Fatal(err)
	}
	runBrowser(t, "previewpages.mjs", "HOSTGATE_URL="+g.url, "HOSTGATE_TOKEN="+g.admin, "HOSTGATE_PREVIEW_PAGES="+string(b))
}

// notHTTP is a loopback port whose server greets every connection with an
// SSH banner and hangs up, as a port that is not an HTTP server does.
func notHTTP(t testing.TB) int {
	_, port, err := net.SplitHostPort(greeter(t, "SSH-2.0-notHTTP\r\n"))
	must(t, err)
	p, err := strconv.Atoi(port)
	must(t, err)
	return p
}
