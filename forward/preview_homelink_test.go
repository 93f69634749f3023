package forward

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestPreviewPagesLinkHomeByTheViewersHost: the page of a dev server that
// is down links the gateway's host list by the address the viewer used,
// as every other page of the preview does. HomeURL was asked with the
// request to the dev server, whose Host is localhost:{port}, and a
// gateway without --public-url (gateway dev) linked
// http://localhost:{port}/, the viewer's own machine.
func TestPreviewPagesLinkHomeByTheViewersHost(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.NotFoundHandler(), &PreviewConfig{
		Authorize: allowAll,
		// cmd/gateway's without --public-url.
		HomeURL: func(r *http.Request) string { return "http://" + r.Host + "/" },
	})
	e.dev.Close() // nothing listens: the 502 page
	resp, body := get(t, ctx, e.pathURL("/"), "Accept", "text/html")
	want := fmt.Sprintf(`<a href="http://%s/">The gateway's host list</a>`, e.gw.Listener.Addr())
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, want) {
		t.Errorf("the path form's 502 page: %d, want a link %s in %s", resp.StatusCode, want, body)
	}
}
