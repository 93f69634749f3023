// Package webui serves the gateway's browser UI: the login page, the hosts
// list and a terminal page per host. Everything it serves is embedded
// (xterm.js is vendored by scripts/gen-webassets), so a gateway without
// internet access serves a working UI.
//
// The UI authenticates with a session cookie that holds the token the person
// typed. The cookie is HttpOnly, SameSite=Lax and host-only (no Domain
// attribute), so preview origins — subdomains of the gateway — never receive
// it.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/redirect"
)

//go:embed static
var static embed.FS

// loginReadTimeout bounds reading the login form (a variable for tests).
var loginReadTimeout = 10 * time.Second

// DefaultCookieName is the session cookie's name.
const DefaultCookieName = "hostgate_session"

// Config connects the UI to the gateway's authentication.
type Config struct {
	// CheckToken reports whether token, sent in the login form of r, is a
	// valid token for a person to log in with. It sees r so that failures
	// count against their source like any other.
	CheckToken func(r *http.Request, token string) bool
	// Authenticated reports whether r carries a valid session.
	Authenticated func(r *http.Request) bool
	// Reaches, when set, reports whether r's session may reach host id
	// and the host exists; the terminal page of another is a 404.
	Reaches func(r *http.Request, id string) bool
	// CookieName defaults to DefaultCookieName.
	CookieName string
	// SecureCookie marks the cookie Secure (set it behind https).
	SecureCookie bool
	// SessionTTL is the cookie's lifetime; 0 means 12 hours.
	SessionTTL time.Duration
}

// UI is the browser UI's handlers.
type UI struct {
	cfg    Config
	assets fs.FS
}

// New returns the UI.
func New(cfg Config) *UI {
	if cfg.CookieName == "" {
		cfg.CookieName = DefaultCookieName
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	sub, _ := fs.Sub(static, "static")
	return &UI{cfg: cfg, assets: sub}
}

// Register adds the UI's routes to mux: "/", "/login", "/logout",
// "/hosts/{id}/terminal" and "/static/".
func (u *UI) Register(mux *http.ServeMux) {
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(u.assets)))
	mux.HandleFunc("GET /{$}", u.page("index.html"))
	terminal := u.page("terminal.html")
	mux.HandleFunc("GET /hosts/{id}/terminal", func(w http.ResponseWriter, r *http.Request) {
		if u.cfg.Reaches != nil && u.cfg.Authenticated(r) && !u.cfg.Reaches(r, r.PathValue("id")) {
			http.Error(w, "no such host", http.StatusNotFound)
			return
		}
		terminal(w, r)
	})
	mux.HandleFunc("GET /login", u.servePage("login.html"))
	// Login CSRF: another site's form must not log a browser in with the
	// other site's token (its terminal would then be the attacker's host),
	// nor log it out, which any page could otherwise do at will (a preview
	// subdomain's too: cross-origin, though same-site).
	csrf := http.NewCrossOriginProtection()
	mux.Handle("POST /login", csrf.Handler(http.HandlerFunc(u.login)))
	mux.Handle("POST /logout", csrf.Handler(http.HandlerFunc(u.logout)))
}

// page serves an embedded page to a logged-in browser and sends others to
// the login page.
func (u *UI) page(name string) http.HandlerFunc {
	serve := u.servePage(name)
	return func(w http.ResponseWriter, r *http.Request) {
		if !u.cfg.Authenticated(r) {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.Path), http.StatusFound)
			return
		}
		serve(w, r)
	}
}

func (u *UI) servePage(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(u.assets, name)
		if err != nil {
			http.Error(w, "page missing", http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// Only our own scripts, styles and sockets; no framing (clickjacking).
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		_, _ = w.Write(b)
	}
}

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	// The server bounds headers only (its WebSockets live long): a body
	// trickled in must not hold the connection.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(loginReadTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := redirect.LocalPath(r.PostForm.Get("next"))
	if token == "" || !u.cfg.CheckToken(r, token) {
		// A code login.js knows the message of.
		http.Redirect(w, r, "/login?error=invalid_token&next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     u.cfg.CookieName,
		Value:    token,
		Path:     "/",
		MaxAge:   int(u.cfg.SessionTTL / time.Second),
		HttpOnly: true,
		Secure:   u.cfg.SecureCookie,
		SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: u.cfg.CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: u.cfg.SecureCookie, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
