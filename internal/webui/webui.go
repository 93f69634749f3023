// Package webui serves the gateway's browser UI: the login page, the hosts
// list and a terminal page per host. Everything it serves is embedded
// (xterm.js is vendored by scripts/gen-webassets), so a gateway without
// internet access serves a working UI.
//
// The UI authenticates with a session cookie. It holds the secret of a
// login session the gateway mints from the token the person typed, never
// that token, so a logout can revoke what the cookie holds. The cookie is
// HttpOnly, SameSite=Lax and host-only (no Domain attribute), so preview
// origins — subdomains of the gateway — never receive it.
package webui

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/muxallow"
	"github.com/hostgate/hostgate/internal/redirect"
)

//go:embed static
var static embed.FS

// loginReadTimeout bounds reading the login form (a variable for tests).
var loginReadTimeout = 10 * time.Second

// DefaultCookieName is the session cookie's name.
const DefaultCookieName = "hostgate_session"

// Login errors the login page names; any other is the gateway's own
// trouble (503).
var (
	// ErrInvalidToken: not a token a person may log in with.
	ErrInvalidToken = errors.New("webui: invalid token")
	// ErrSessionToken: the secret of a login session, not a token.
	ErrSessionToken = errors.New("webui: a login session's secret, not a token")
	// ErrExpiredToken: a token past its expiry.
	ErrExpiredToken = errors.New("webui: token expired")
	// ErrTooManyLogins: the browser's address failed too often lately and
	// is refused whatever it sends, a good token too, for a while. An
	// error matching it that has a method RetryAfter() time.Duration
	// tells the login page how long.
	ErrTooManyLogins = errors.New("webui: too many failed logins from this address")
	// ErrUnavailable: Authenticated's answer when the gateway cannot tell
	// now whether a session holds (its state store does not answer, or it
	// is shutting down): the session may well be good.
	ErrUnavailable = errors.New("webui: the gateway cannot check sessions now")
	// ErrSessionEnded: Authenticated's answer for a session the gateway
	// no longer honours (logged out, revoked, expired, or a gateway that
	// started with fresh state): its cookie is cleared.
	ErrSessionEnded = errors.New("webui: the session has ended")
	// ErrTwoSessions: Authenticated's answer for a request carrying two
	// different session cookies (a page under a parent domain, such as a
	// preview, planted one). Logging in again does not end it: the
	// browser's cookies for the site must be cleared.
	ErrTwoSessions = errors.New("webui: two different session cookies")
	// ErrAgentLogin: Authenticated's answer for a cookie holding an
	// agent's token, which the web UI does not take.
	ErrAgentLogin = errors.New("webui: an agent token cannot use the web UI")
)

// Config connects the UI to the gateway's authentication.
type Config struct {
	// Login starts a session for token, sent in the login form of r,
	// lasting at most ttl: it returns the session's secret, which the
	// cookie carries, and its expiry. ErrInvalidToken, ErrExpiredToken,
	// ErrSessionToken or ErrTooManyLogins (wrapped) refuse the login. It sees r so that failures count against
	// their source like any other.
	Login func(r *http.Request, token string, ttl time.Duration) (session string, expires time.Time, err error)
	// Logout ends the session whose secret a cookie of r holds, for good:
	// clearing the cookie alone would leave a copy of it working. Nil only
	// clears the cookie.
	Logout func(r *http.Request, session string) error
	// Authenticated is nil when r carries a valid session; an error
	// matching ErrSessionEnded when the one it carries is no longer
	// honoured; ErrTooManyLogins when r's address is refused by the rate
	// limit, ErrUnavailable when the gateway cannot tell now;
	// ErrTwoSessions or ErrAgentLogin for a cookie refused for that;
	// another error when it carries none. Only ErrSessionEnded clears the
	// cookie.
	Authenticated func(r *http.Request) error
	// Reaches, when set, reports whether r's session may reach host id
	// and the host exists; the terminal page of another is a 404.
	Reaches func(r *http.Request, id string) bool
	// CookieName defaults to DefaultCookieName.
	CookieName string
	// SecureCookie marks the cookie Secure (set it behind https).
	SecureCookie bool
	// OldCookieNames are names the session cookie had before (the plain
	// name, before a gateway behind https took a __Host- one). A login
	// ends the sessions they hold and clears them: the browser logged in
	// again under the new name, and the old session would otherwise live
	// on, unused, until it expires.
	OldCookieNames []string
	// SessionTTL is a session's longest lifetime; 0 means 12 hours.
	SessionTTL time.Duration
	// FormActions are CSP sources, besides the UI's own origin, where the
	// login form's redirects may lead: the preview subdomains, where the
	// login flow of a preview ends ("*.preview.example.com:*").
	// Browsers hold a form submission's redirects to the page's
	// form-action too, and with 'self' alone a person who logged in on
	// the way to a subdomain preview stayed on the login page.
	FormActions []string
	// TrustedOrigins are origins (scheme://host[:port], as
	// http.CrossOriginProtection.AddTrustedOrigin takes them; others are
	// left out) whose login and logout posts are the UI's own besides
	// the request's Host: --public-url's, which behind a proxy that
	// passes Host without its port is not the Host, where a browser
	// without fetch metadata is judged by its Origin alone.
	TrustedOrigins []string
}

// UI is the browser UI's handlers.
type UI struct {
	cfg        Config
	assets     fs.FS
	formAction string             // the pages' CSP form-action sources
	notFound   *template.Template // the UI's 404 page; its data is the message
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
	return &UI{
		cfg: cfg, assets: sub,
		formAction: strings.Join(append([]string{"'self'"}, cfg.FormActions...), " "),
		notFound:   template.Must(template.ParseFS(sub, "notfound.html")),
	}
}

// Messages of the 404 page. Neither names what the URL holds: a link's
// words would then be the gateway's.
const (
	noSuchPage = "There is no page at this address on this gateway."
	noSuchHost = "No such host, or not one this login reaches (a sandbox's host ends with its sandbox): the hosts list at / shows those you can open."
)

// Register adds the UI's routes to mux: "/", "/login", "/logout",
// "/hosts/{id}/terminal" and "/static/", and a 404 page for GET and HEAD
// of any path no other route of mux serves ("/v1/" has its own, JSON).
func (u *UI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /static/", u.serveAsset)
	mux.HandleFunc("GET /{$}", u.page("index.html"))
	terminal := u.servePage("terminal.html")
	mux.HandleFunc("GET /hosts/{id}/terminal", func(w http.ResponseWriter, r *http.Request) {
		// Authenticated once: a stale cookie counted two failed
		// authentications against the browser's address at each load.
		if !u.loggedIn(w, r) {
			return
		}
		if u.cfg.Reaches != nil && !u.cfg.Reaches(r, r.PathValue("id")) {
			u.serveNotFound(w, noSuchHost)
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
	for _, o := range u.cfg.TrustedOrigins {
		_ = csrf.AddTrustedOrigin(o) // the caller's to give well-formed
	}
	mux.Handle("POST /login", csrf.Handler(http.HandlerFunc(u.login)))
	mux.Handle("POST /logout", csrf.Handler(http.HandlerFunc(u.logout)))
	// A browser that followed a stale link or mistyped one got Go's
	// "404 page not found" in plain text, with no way back. Every method
	// comes here, so the mux's own 405 is answered here too.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// As the mux's own 405 would: the methods in order, HEAD where
		// GET is.
		if allow := muxallow.Methods(mux, r, "/", http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPatch, http.MethodPost, http.MethodPut); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.NotFound(w, r)
			return
		}
		u.serveNotFound(w, noSuchPage)
	})
}

// serveAsset serves a file under /static/: a script, a stylesheet, an
// image. http.FileServer answered a missing one with its plain-text 404,
// which a browser sent there showed with no way back, and listed /static/
// and /static/vendor/; the pages themselves (*.html) are served only by
// their routes, which give them their CSP and no-framing headers.
func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	name := strings.TrimPrefix(r.URL.Path, "/static/")
	f, err := u.assets.Open(name)
	if err == nil {
		defer f.Close()
	}
	var st fs.FileInfo
	if err == nil {
		st, err = f.Stat()
	}
	content, seeks := f.(io.ReadSeeker)
	if err != nil || st.IsDir() || path.Ext(name) == ".html" || !fs.ValidPath(name) || !seeks {
		u.assetNotFound(w, r)
		return
	}
	http.ServeContent(w, r, name, st.ModTime(), content)
}

// assetNotFound answers a missing asset: the UI's 404 page to a browser
// navigating to it (a link, the address bar), and to a script, stylesheet
// or fetch a plain-text 404, which is all they can use.
func (u *UI) assetNotFound(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Mode") == "navigate" || (r.Header.Get("Sec-Fetch-Mode") == "" && strings.Contains(r.Header.Get("Accept"), "text/html")) {
		u.serveNotFound(w, noSuchPage)
		return
	}
	http.Error(w, "404 no such file among the web UI's assets", http.StatusNotFound)
}

// serveNotFound answers 404 with the UI's page saying msg, in the UI's
// style and with the way back to the hosts list.
func (u *UI) serveNotFound(w http.ResponseWriter, msg string) {
	var b bytes.Buffer
	if err := u.notFound.Execute(&b, msg); err != nil {
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	u.writePage(w, http.StatusNotFound, b.Bytes())
}

// page serves an embedded page to a logged-in browser and sends others to
// the login page.
func (u *UI) page(name string) http.HandlerFunc {
	serve := u.servePage(name)
	return func(w http.ResponseWriter, r *http.Request) {
		if u.loggedIn(w, r) {
			serve(w, r)
		}
	}
}

// loggedIn reports whether r carries a valid session, and otherwise sends
// the browser to the login page.
func (u *UI) loggedIn(w http.ResponseWriter, r *http.Request) bool {
	err := u.cfg.Authenticated(r)
	if err == nil {
		return true
	}
	u.SendToLogin(w, r, err, r.URL.Path)
	return false
}

// SendToLogin answers r, which err (an error as Config.Authenticated
// answers) refused, with the login page saying why, leading to next once
// logged in; a session cookie the gateway no longer honours is cleared.
// For the gateway's other pages that need a login, such as a preview's
// login flow, which a browser with a stale cookie reached over and over.
func (u *UI) SendToLogin(w http.ResponseWriter, r *http.Request, err error, next string) {
	loc := u.LoginURL(r, err, next)
	if errors.Is(err, ErrSessionEnded) {
		// Cleared, so the browser stops sending it: each request with it
		// counts a failed authentication against the browser's address
		// (it is a guess at a secret like any other to the gateway, which
		// cannot tell a stale session from a forged one), and a few tabs
		// reloaded after a gateway restart had the login that followed
		// refused as rate-limited.
		u.ClearSession(w, r)
	}
	http.Redirect(w, r, loc, http.StatusFound)
}

// LoginURL is the login page's URL for r, which err (an error as
// Config.Authenticated answers) refused, saying why, leading to next
// once logged in: for a redirect SendToLogin does not make, such as a
// path-form preview's, whose route clears a stale cookie itself.
func (u *UI) LoginURL(r *http.Request, err error, next string) string {
	code := ""
	switch {
	// Not the session's fault: these said the login had ended, and the
	// person logged in again only to be refused (a rate limit) or to find
	// the old session good after all (the store).
	case errors.Is(err, ErrTooManyLogins):
		code = "rate_limited"
	case errors.Is(err, ErrUnavailable):
		code = "unavailable"
	// Nor ended: "log in again" did not help with a planted cookie,
	// which stays (and clearing ours would leave the planted one to
	// authenticate alone), and said nothing of an agent's token.
	case errors.Is(err, ErrTwoSessions):
		code = "two_sessions"
	case errors.Is(err, ErrAgentLogin):
		code = "agent_login"
	default:
		// A session cookie the gateway no longer honours: its login
		// ended (revoked, or logged out in another browser). The login
		// page said nothing, as to a first visit, after a reload of a
		// revoked terminal. A cookie that expired is no longer sent.
		if c, err := r.Cookie(u.cfg.CookieName); err == nil && c.Value != "" || u.sawEnd(r) {
			code = "session_ended"
		}
	}
	return loginLocation(code, err, next)
}

// loginLocation is the login page's URL saying code (none when empty),
// with how many seconds to wait when err, ErrTooManyLogins, says, and
// next, where a login leads.
func loginLocation(code string, err error, next string) string {
	q := url.Values{"next": {next}}
	if code != "" {
		q.Set("error", code)
	}
	var ra interface{ RetryAfter() time.Duration }
	if code == "rate_limited" && errors.As(err, &ra) && ra.RetryAfter() > 0 {
		// Whole seconds, rounded up, as Retry-After: one who waits as
		// told finds the window over.
		q.Set("retry", strconv.Itoa(int((ra.RetryAfter()+time.Second-1)/time.Second)))
	}
	return "/login?" + q.Encode()
}

// ClearSession tells the browser to drop r's session cookies, of the name
// it has now and of those before, as they were set: for an answer that
// says the session is no longer honoured (ErrSessionEnded) outside the
// UI's pages, such as the API's GET /v1/me that the terminal page asks.
func (u *UI) ClearSession(w http.ResponseWriter, r *http.Request) {
	if u.clearCookies(w, r, append([]string{u.cfg.CookieName}, u.cfg.OldCookieNames...)...) {
		// In its place, a mark that the login ended, which is no
		// credential (Authenticate never reads it, so it counts no
		// failure): the next page load still says the login ended, where
		// it said nothing once the cookie was gone (a reload of a revoked
		// terminal, whose page had asked /v1/me).
		http.SetCookie(w, &http.Cookie{Name: u.endedCookie(), Value: "1", Path: "/", MaxAge: int(endedMark / time.Second), HttpOnly: true, Secure: u.cfg.SecureCookie, SameSite: http.SameSiteLaxMode})
	}
}

// endedMark is how long the mark of an ended login (endedCookie) lasts:
// the login page's next visit, not a record.
const endedMark = 24 * time.Hour

// endedCookie is the name of the mark ClearSession leaves.
func (u *UI) endedCookie() string { return u.cfg.CookieName + "_ended" }

// sawEnd reports whether r carries the mark of an ended login.
func (u *UI) sawEnd(r *http.Request) bool {
	return len(r.CookiesNamed(u.endedCookie())) > 0
}

// clearCookies tells the browser to drop r's cookies of these names, with
// the attributes the UI sets them with (host-only, Path=/, HttpOnly,
// SameSite=Lax, Secure behind https: a __Host- cookie is cleared only by
// one that is Secure with Path=/ and no Domain).
// It reports whether r had any.
func (u *UI) clearCookies(w http.ResponseWriter, r *http.Request, names ...string) (cleared bool) {
	for i, name := range names {
		if slices.Contains(names[:i], name) || len(r.CookiesNamed(name)) == 0 {
			continue
		}
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: u.cfg.SecureCookie, SameSite: http.SameSiteLaxMode})
		cleared = true
	}
	return cleared
}

func (u *UI) servePage(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(u.assets, name)
		if err != nil {
			http.Error(w, "page missing", http.StatusInternalServerError)
			return
		}
		u.writePage(w, http.StatusOK, b)
	}
}

// writePage sends an HTML page of the UI with its security headers.
func (u *UI) writePage(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Only our own scripts, styles and sockets; no framing (clickjacking).
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action "+u.formAction)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// maxLoginBody bounds the login form's body: a token and a path.
const maxLoginBody = 16 << 10

// loginFormTypes are the bodies the login form is taken in.
const loginFormTypes = "application/x-www-form-urlencoded (an HTML form, curl -d) or multipart/form-data (curl -F, FormData)"

// parseLoginForm reads the login form into r.PostForm, or says the status
// and message to refuse it with. net/http's ParseForm reads urlencoded
// bodies only: a multipart one (curl -F token=…) was left unread and its
// valid token answered invalid_token, and so was a JSON one.
func parseLoginForm(r *http.Request) (status int, msg string) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		// The body is bounded by maxLoginBody, so ReadForm keeps every
		// part in memory; a file part has no place in a login.
		err := r.ParseMultipartForm(maxLoginBody)
		if r.MultipartForm != nil {
			defer r.MultipartForm.RemoveAll()
		}
		if err != nil {
			return http.StatusBadRequest, "bad form: " + err.Error()
		}
		if len(r.MultipartForm.File) > 0 {
			return http.StatusBadRequest, "bad form: a file part; send the token as a field (curl -F token=TOKEN, or token=<FILE for a file's content; token=@FILE uploads a file)"
		}
	case "", "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return http.StatusBadRequest, "bad form: " + err.Error()
		}
	default:
		return http.StatusUnsupportedMediaType, "login takes the form as " + loginFormTypes + ", not " + ct
	}
	return 0, ""
}

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	// The server bounds headers only (its WebSockets live long): a body
	// trickled in must not hold the connection.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(loginReadTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if status, msg := parseLoginForm(r); status != 0 {
		http.Error(w, msg, status)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := redirect.LocalPath(r.PostForm.Get("next"))
	session, expires, err := "", time.Time{}, ErrInvalidToken
	if token != "" {
		session, expires, err = u.cfg.Login(r, token, u.cfg.SessionTTL)
	}
	if err != nil {
		// A code login.js knows the message of.
		code := ""
		switch {
		case errors.Is(err, ErrSessionToken):
			code = "session_token"
		case errors.Is(err, ErrExpiredToken):
			code = "expired_token"
		case errors.Is(err, ErrTooManyLogins):
			code = "rate_limited"
		case errors.Is(err, ErrInvalidToken):
			code = "invalid_token"
		default:
			http.Error(w, "could not start a session; try again", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, loginLocation(code, err, next), http.StatusSeeOther)
		return
	}
	// The session the browser held until now ends too: its cookie is
	// overwritten, and a logout would then end only the new one. Best
	// effort: an API token in an older cookie is not a session, and one
	// left over lives no longer than its own expiry.
	if u.cfg.Logout != nil {
		vals, _ := sessionValues(r, append([]string{u.cfg.CookieName}, u.cfg.OldCookieNames...)...)
		for _, v := range vals {
			if v != session {
				_ = u.cfg.Logout(r, v)
			}
		}
	}
	for _, name := range u.cfg.OldCookieNames {
		if name != u.cfg.CookieName && len(r.CookiesNamed(name)) > 0 {
			http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: u.cfg.SecureCookie, SameSite: http.SameSiteLaxMode})
		}
	}
	u.clearCookies(w, r, u.endedCookie()) // logged in again
	// The browser drops the cookie when the session ends anyway.
	maxAge := u.cfg.SessionTTL
	if !expires.IsZero() {
		maxAge = min(maxAge, time.Until(expires))
	}
	http.SetCookie(w, &http.Cookie{
		Name:     u.cfg.CookieName,
		Value:    session,
		Path:     "/",
		MaxAge:   max(int(maxAge/time.Second), 1),
		HttpOnly: true,
		Secure:   u.cfg.SecureCookie,
		SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// maxSessionCookies bounds the distinct session cookie values a login or
// logout ends. A browser sends one, two when a page under a parent domain
// planted another; each costs a store lookup (56 µs), and a Cookie
// header may hold 3,000 (what net/http parses at most): 0.17 s of the
// gateway's CPU for one request no token had to authenticate.
const maxSessionCookies = 8

// sessionValues is the distinct non-empty values r's cookies of these
// names hold, at most maxSessionCookies of them; ok is false when there
// were more.
func sessionValues(r *http.Request, names ...string) (vals []string, ok bool) {
	for _, name := range names {
		for _, c := range r.CookiesNamed(name) {
			if c.Value == "" || slices.Contains(vals, c.Value) {
				continue
			}
			if len(vals) == maxSessionCookies {
				return vals, false
			}
			vals = append(vals, c.Value)
		}
	}
	return vals, true
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	// Every value sent: a page under a parent domain may have added one.
	vals, ok := sessionValues(r, u.cfg.CookieName)
	if !ok {
		// Refused whole, so no session is left running while the page
		// says it ended; the browser that holds them can clear them.
		http.Error(w, fmt.Sprintf("more than %d session cookies for this site (a page under a parent domain set them?): clear this site's cookies in the browser", maxSessionCookies), http.StatusBadRequest)
		return
	}
	for _, v := range vals {
		if u.cfg.Logout == nil {
			break
		}
		if err := u.cfg.Logout(r, v); err != nil {
			// The cookie stays, so the person can try again: cleared, it
			// would look logged out while the session still works.
			http.Error(w, "could not end the session; try again", http.StatusServiceUnavailable)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: u.cfg.CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: u.cfg.SecureCookie, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
