package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// TestBrowserPreviewHungDevServer: in Chromium, a page load from a dev
// server that takes the request and never answers ends with the preview's
// 504 page (after forward.DefaultNavigationTimeout, 45 s: there is no flag
// to shorten it), while a page's fetch that asks for text/html and its
// EventSource, both held by the dev server longer than that, are answered
// whole. Before, the tab spun for as long as the dev server hung. It also
// checks that Chromium's own requests carry what the preview tells page
// loads by (Sec-Fetch-Mode).
func TestBrowserPreviewHungDevServer(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the preview's 45 s bound on a page load")
	}
	d := startDev(t)
	release := make(chan struct{})
	var (
		mu       sync.Mutex
		arrived  = map[string]string{} // path → Sec-Fetch-Mode
		released sync.Once
	)
	t.Cleanup(func() { released.Do(func() { close(release) }) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!doctype html><title>dev</title><h1 id="title">dev</h1><p id="fetch">waiting</p><p id="events">waiting</p>
<script>
fetch("/slow", {headers: {Accept: "text/html"}}).then(async (r) => { document.getElementById("fetch").textContent = "fetch: " + r.status + " " + await r.text(); },
  (e) => { document.getElementById("fetch").textContent = "fetch failed: " + e; });
const es = new EventSource("/events");
es.onmessage = (e) => { document.getElementById("events").textContent = "events: " + e.data; es.close(); };
es.onerror = () => { document.getElementById("events").textContent = "events failed"; es.close(); };
</script>`)
		case "/control/arrived":
			mu.Lock()
			_, a := arrived["/slow"]
			_, b := arrived["/events"]
			mu.Unlock()
			fmt.Fprint(w, map[bool]string{true: "yes", false: "no"}[a && b])
		case "/control/release":
			released.Do(func() { close(release) })
		case "/hang":
			mu.Lock()
			arrived[r.URL.Path] = r.Header.Get("Sec-Fetch-Mode")
			mu.Unlock()
			<-r.Context().Done()
		case "/slow", "/events":
			mu.Lock()
			arrived[r.URL.Path] = r.Header.Get("Sec-Fetch-Mode")
			mu.Unlock()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			if r.URL.Path == "/slow" {
				fmt.Fprint(w, "slow done")
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: released\n\n")
		default:
			http.NotFound(w, r)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	preview := "http://" + port + "--local.localhost:" + d.port
	runBrowser(t, "hung.mjs", "HOSTGATE_URL="+d.url, "HOSTGATE_TOKEN="+d.admin,
		"HOSTGATE_PAGE_URL="+preview+"/", "HOSTGATE_HANG_URL="+preview+"/hang",
		"HOSTGATE_CONTROL_URL=http://"+ln.Addr().String()+"/control", "HOSTGATE_DEV_PORT="+port)
	mu.Lock()
	defer mu.Unlock()
	for path, want := range map[string]string{"/hang": "navigate", "/slow": "cors", "/events": "cors"} {
		if got := arrived[path]; got != want {
			t.Errorf("Chromium's %s came with Sec-Fetch-Mode %q, want %q", path, got, want)
		}
	}
}
