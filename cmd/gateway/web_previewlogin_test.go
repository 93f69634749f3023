package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviewLoginRefusalsArePages: /preview-login's link cut or edited
// (no host, port 0), or on a gateway without a preview domain, answers
// as the preview's other refusals do, a page for a browser saying what to
// do and JSON for a program, where it answered a line of plain text, "bad
// preview login request", with no next step.
func TestPreviewLoginRefusalsArePages(t *testing.T) {
	ctx := testCtx(t)
	withDomain := startServe(t, filepath.Join(t.TempDir(), "state"), func(c *serveConfig) { c.PreviewDomain = "preview.test" })
	without := startServe(t, filepath.Join(t.TempDir(), "state"))
	for _, tc := range []struct {
		name, url, accept string
		status            int
		says              string
	}{
		{"no host, a browser", withDomain + "/preview-login?port=3000&next=/", "text/html", http.StatusBadRequest, "<h1>This preview login link is incomplete.</h1>"},
		{"port 0, a program", withDomain + "/preview-login?host=h1&port=0", "application/json", http.StatusBadRequest, `{"error":{"code":"bad_request","message":"This preview login link is incomplete. It needs a host id and a port`},
		{"no preview domain", without + "/preview-login?host=h1&port=3000&next=/", "text/html", http.StatusNotFound, "This gateway has no preview domain (gateway serve --preview-domain)"},
	} {
		req, err := http.NewRequestWithContext(ctx, "GET", tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", tc.accept)
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		req.Header.Set("Sec-Fetch-Site", "none")
		req.Header.Set("Sec-Fetch-Dest", "document")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		ct, _, _ := strings.Cut(res.Header.Get("Content-Type"), ";")
		wantCT := strings.Fields(strings.ReplaceAll(tc.accept, ",", " "))[0]
		if res.StatusCode != tc.status || ct != wantCT || !strings.Contains(string(b), tc.says) || res.Header.Get("Hostgate-Error") == "" {
			t.Errorf("%s: %d %s %q, want %d %s saying %q", tc.name, res.StatusCode, ct, b, tc.status, wantCT, tc.says)
		}
	}
}
