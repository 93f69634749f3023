package forward

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// errorPage is what a browser gets when a preview cannot be served. It
// follows the viewer's colour scheme as the gateway's web UI does (its
// colours, from internal/webui/static/style.css): it was always light, a
// white page flashing up in a dark-mode browser between dark ones. Text
// keeps a contrast of 4.5 or more with the page in both schemes. Its style
// is inline: the page must stand alone on a preview origin, where the
// gateway's stylesheet is not served.
//
// The title says what happened, as the heading does: it is what a screen
// reader reads first, and what a tab or the history shows; "502 Bad
// Gateway · preview" said neither which host nor what to do. The message
// is the page's main landmark, and the next step is a link: a reload where
// the trouble may pass (5xx), and the gateway's host list, where a host's
// state shows and a sandbox is provisioned again.
var errorPage = template.Must(template.New("e").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} · {{.Status}} · hostgate preview</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="dark light">
<style>:root{color-scheme:dark light;--bg:#0f1115;--fg:#e6e6e6;--muted:#8b93a1;--link:#58a6ff}
@media (prefers-color-scheme:light){:root{--bg:#ffffff;--fg:#1f2328;--muted:#59636e;--link:#0969da}}
body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:40em;margin:4em auto;padding:0 1em;background:var(--bg);color:var(--fg)}
h1{font-size:1.4em;line-height:1.3}a{color:var(--link)}nav a{margin-right:1.5em}small{color:var(--muted)}</style></head>
<body><main><h1>{{.Message}}</h1>{{if .Hint}}<p>{{.Hint}}</p>{{end}}
{{if or .Retry .Home}}<nav aria-label="What next">{{if .Retry}}<a href="">Reload this page</a>{{end}}{{if .Home}}<a href="{{.Home}}">The gateway's host list</a>{{end}}</nav>{{end}}
{{if .Wait}}<p>This page reloads itself when the preview answers.</p>{{end}}
<p><small>{{.Status}} · hostgate preview</small></p></main>{{if .Wait}}<script>` + waitScript + `</script>{{end}}</body></html>
`))

// waitScript reloads a page load's 502 or 503 page once the preview answers
// something else than the preview's own error (errorHeader): a dev
// server's client that lost its server (Vite before 6 pings with a fetch,
// which any answer satisfies, the 502 too) reloaded into this page, which
// stayed there after the dev server was back, where without the gateway
// the client had waited and reloaded into the app. It asks while the tab
// is shown, every second and then less often, up to every 10 s.
const waitScript = `(() => {
  let wait = 1000;
  const ask = async () => {
    if (document.visibilityState === "visible") {
      try {
        const r = await fetch(location.href, { method: "HEAD", cache: "no-store", headers: { Accept: "text/html" } });
        if (!r.headers.has("` + errorHeader + `")) { location.reload(); return; }
      } catch (e) {}
    }
    wait = Math.min(wait * 1.5, 10000);
    setTimeout(ask, wait);
  };
  setTimeout(ask, wait);
})();`

// errorHeader names the code of an answer the preview gave itself (not
// the dev server), which waitScript tells by.
const errorHeader = "Hostgate-Error"

// errorPageCSP lets the page run its one script and nothing else: on the
// path form it is on the gateway's origin.
var errorPageCSP = func() string {
	sum := sha256.Sum256([]byte(waitScript))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; connect-src 'self'; base-uri 'none'; form-action 'none'"
}()

// WritePage answers r as the preview's own refusals do: a page for a
// browser, in the look of the others, or the project's JSON error. It is
// for the gateway's steps on the way to a preview (its login), which a
// person meets between a preview's pages.
func (p *Preview) WritePage(w http.ResponseWriter, r *http.Request, status int, code, msg, hint string) {
	p.writeError(w, r, status, code, msg, hint)
}

// writeError answers with the project's JSON error shape, or an HTML page
// for browsers.
func (p *Preview) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg, hint string) {
	p.writeErrorFields(w, r, status, code, msg, hint, nil)
}

// writeErrorFields is writeError whose JSON error also carries fields
// (an ended execution's reason and endedAt, as the API's gone answers).
func (p *Preview) writeErrorFields(w http.ResponseWriter, r *http.Request, status int, code, msg, hint string, fields map[string]string) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(errorHeader, code)
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="hostgate"`)
	}
	if wantsHTML(r) {
		home := ""
		if p.cfg.HomeURL != nil && r.Context().Value(viaShareKey{}) == nil {
			home = p.cfg.HomeURL(inbound(r))
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", errorPageCSP)
		w.WriteHeader(status)
		_ = errorPage.Execute(w, map[string]any{
			"Status": strconv.Itoa(status) + " " + http.StatusText(status), "Message": msg, "Hint": hint,
			"Title": strings.TrimSuffix(msg, "."),
			// 5xx: the host, the dev server or the gateway's store may
			// be back in a moment. A 4xx comes again as it is.
			"Retry": status >= 500, "Home": home,
			// Not a 504: its dev server holds requests, and the page's
			// would wait there with the others.
			"Wait": (status == http.StatusBadGateway || status == http.StatusServiceUnavailable) && r.Method == http.MethodGet,
		})
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	m := msg
	if hint != "" {
		m += " " + hint
	}
	e := map[string]string{"code": code, "message": m}
	for k, v := range fields {
		e[k] = v
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}
