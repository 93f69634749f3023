package forward

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestPreviewWaitingPageLogsNoWarnings: a preview whose dev server is
// not running, whose host is offline or unknown answers a page that says
// so and asks again every 10 s while the tab is open (waitScript), as a
// dev server's client pings. Each answer was a WARN "preview upstream
// failed" in the gateway's log: a tab shown on a stopped dev server
// wrote 8,640 a day, and a soak's one mistyped host id one per request.
// They are the viewer's to fix, and the page tells them; the log keeps
// them at debug. An answer that is not HTTP is still a warning.
func TestPreviewWaitingPageLogsNoWarnings(t *testing.T) {
	ctx := testCtx(t)
	var logs testenv.LogBuffer
	e := newPreviewEnv(t, http.NotFoundHandler(), &PreviewConfig{Authorize: allowAll,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	dead := echoPort(t, testenv.RefusedAddr(t))
	for _, c := range []struct {
		url  string
		code int
	}{
		{fmt.Sprintf("%s/preview/dev/%d/", e.gw.URL, dead), http.StatusBadGateway},
		{fmt.Sprintf("%s/preview/gone/%d/", e.gw.URL, e.devPort), http.StatusServiceUnavailable},
		{fmt.Sprintf("%s/preview/nobody/%d/", e.gw.URL, e.devPort), http.StatusNotFound},
	} {
		for i := 0; i < 5; i++ {
			req := mustReq(t, ctx, c.url)
			req.Method = http.MethodHead // waitScript's question
			req.Header.Set("Accept", "text/html")
			if resp, _ := do(t, req); resp.StatusCode != c.code {
				t.Fatalf("%s: %d, want %d", c.url, resp.StatusCode, c.code)
			}
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 0 {
		t.Errorf("%d warnings for 15 answers the viewer's page explains:\n%s", n, logs.String())
	}
}
