package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnknownPathsOfGateway: a browser at a path nothing serves gets the
// web UI's 404 page (it got Go's plain "404 page not found"), while every
// API path keeps its JSON answers (DESIGN.md: errors are JSON
// {error: {code, message}}), and the other routes their methods.
func TestUnknownPathsOfGateway(t *testing.T) {
	ctx := testCtx(t)
	base := startServe(t, filepath.Join(t.TempDir(), "state"))
	for _, tc := range []struct {
		method, path string
		status       int
		kind         string // "html", "json" or "text"
		allow        string
	}{
		{"GET", "/nosuch", 404, "html", ""},
		{"GET", "/hosts/box", 404, "html", ""},
		{"HEAD", "/nosuch", 404, "html", ""},
		{"POST", "/nosuch", 404, "text", ""},
		{"GET", "/v1/nosuch", 404, "json", ""},
		{"GET", "/v1/", 404, "json", ""},
		{"POST", "/v1/hosts", 405, "json", "GET"},
		{"DELETE", "/v1/hosts/box/ssh", 405, "json", "GET"},
		{"POST", "/healthz", 405, "text", "GET, HEAD"},
		{"POST", "/metrics", 405, "text", "GET, HEAD"},
		{"DELETE", "/logout", 405, "text", "POST"},
	} {
		req, _ := http.NewRequestWithContext(ctx, tc.method, base+tc.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		ct := res.Header.Get("Content-Type")
		var kind string
		switch {
		case strings.HasPrefix(ct, "text/html"):
			kind = "html"
		case strings.HasPrefix(ct, "application/json"):
			kind = "json"
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" {
				t.Errorf("%s %s: %q is not the API's JSON error", tc.method, tc.path, body)
			}
		default:
			kind = "text"
		}
		if res.StatusCode != tc.status || kind != tc.kind || res.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %s (%s), Allow %q; want %d %s, Allow %q", tc.method, tc.path, res.StatusCode, kind, ct, res.Header.Get("Allow"), tc.status, tc.kind, tc.allow)
		}
		if kind == "html" && tc.method == "GET" && !strings.Contains(string(body), `href="/">Go to the hosts list</a>`) {
			t.Errorf("%s %s: the 404 page has no way back to the hosts list:\n%s", tc.method, tc.path, body)
		}
	}
}
