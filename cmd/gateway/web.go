package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/previewauth"
	"github.com/hostgate/hostgate/internal/redirect"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/webterm"
	"github.com/hostgate/hostgate/internal/webui"
	"github.com/hostgate/hostgate/sshlayer"
)

func init() { serveHooks = append(serveHooks, attachWeb) }

const (
	ticketTTL        = time.Minute
	previewCookieTTL = 12 * time.Hour
	// maxPreviewCookies bounds the preview cookies of one request that
	// are checked. A browser sends the viewer's one for the origin and
	// those planted for the preview domain whose paths prefix the
	// request's: for a path of depth d, at most 2d+1 ("/", "/a", "/a/",
	// …).
	maxPreviewCookies = 64
	maxShareTTL       = 7 * 24 * time.Hour
)

// cookieNames returns the browser cookies' names for a gateway reached
// over https or not: the session's on its origin and the subdomain previews' own.
// Behind https they are __Host- cookies, which no page can set with a
// Domain attribute: a preview page under the gateway's parent domain
// planted hostgate_session for the parent, and the gateway, refusing two
// different session cookies, locked the viewer out until they cleared
// the site's cookies. Plain http keeps the plain names, since browsers
// refuse __Host- cookies that are not Secure. A browser logged in under
// the plain name before an upgrade logs in again, once (README).
func cookieNames(https bool) (session, preview string) {
	if https {
		return gateway.SecureSessionCookie, "__Host-hostgate_preview"
	}
	return gateway.SessionCookie, "hostgate_preview"
}

// registerTerminalMetrics publishes the web terminals' counts.
func registerTerminalMetrics(reg *prometheus.Registry, stats func() webterm.Stats) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "web_terminals",
			Help: "Web terminals whose shell runs now, with a page or kept for one (--terminal-keep).",
		}, func() float64 { return float64(stats().Open) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "web_terminals_waiting",
			Help: "Web terminals kept with no page, for their page to come back (--terminal-keep).",
		}, func() float64 { return float64(stats().Waiting) }),
	)
}

// terminalKeep is webterm.Config.Keep for --terminal-keep.
func (c *serveConfig) terminalKeep() time.Duration {
	if c.TerminalKeep == 0 {
		return -1 // webterm's "off"; its 0 is the default
	}
	return c.TerminalKeep
}

// previewForbidden is the preview's refusal of tok, good but not one that
// reaches hostID, in the words of the API's own refusals.
func previewForbidden(tok store.Token, hostID string) *forward.ForbiddenError {
	if tok.Role == store.RoleAgent {
		return &forward.ForbiddenError{
			Msg:  "An agent's token cannot reach host " + hostID + ".",
			Hint: "It is the token an agent connects with; use a client token for the host (gateway token create --role client --host " + hostID + ") or an admin token.",
		}
	}
	return &forward.ForbiddenError{
		Msg:  "Host " + hostID + " is not among the hosts this token reaches.",
		Hint: "A client token reaches only the hosts it was created with; an admin makes one for " + hostID + " with gateway token create --role client --host " + hostID + ".",
	}
}

// attachWeb adds what a browser uses: the UI, the pty socket, previews
// (both forms) with their login flow, and the shares API.
func attachWeb(ctx context.Context, s *serving) (func(), error) {
	srv := s.Server
	mux := srv.Mux()
	hc, err := gateway.NewHostClients(srv)
	if err != nil {
		return nil, err
	}
	secure := s.Config.https()
	sessionCookie, previewCookie := cookieNames(secure)
	var oldSessionCookies []string
	if sessionCookie != gateway.SessionCookie {
		// Behind https: the plain name a browser kept from before.
		oldSessionCookies = []string{gateway.SessionCookie}
	}

	var formActions []string
	if src := previewFormAction(s.Config.PreviewDomain); src != "" {
		// The login flow of a subdomain preview ends there.
		formActions = []string{src}
	}
	ui := webui.New(webui.Config{
		FormActions:    formActions,
		TrustedOrigins: publicOrigins(s.Config.PublicURL),
		Login: func(r *http.Request, token string, ttl time.Duration) (string, time.Time, error) {
			sec, sess, err := srv.StartSession(r, token, ttl)
			switch {
			case errors.Is(err, store.ErrSessionParent):
				return "", time.Time{}, fmt.Errorf("%w: %w", webui.ErrSessionToken, err)
			case errors.Is(err, gateway.ErrLoginLimited):
				return "", time.Time{}, fmt.Errorf("%w: %w", webui.ErrTooManyLogins, err)
			case errors.Is(err, gateway.ErrLoginRefused) && errors.Is(err, store.ErrExpired):
				return "", time.Time{}, fmt.Errorf("%w: %w", webui.ErrExpiredToken, err)
			case errors.Is(err, gateway.ErrLoginRefused):
				return "", time.Time{}, fmt.Errorf("%w: %w", webui.ErrInvalidToken, err)
			case err != nil:
				s.Logger.Error("login: start session", "err", err)
				return "", time.Time{}, err
			}
			return sec, sess.ExpiresAt, nil
		},
		Logout: func(r *http.Request, session string) error {
			err := srv.EndSession(r.Context(), session)
			if err != nil {
				s.Logger.Error("logout: end session", "err", err)
			}
			return err
		},
		Authenticated: func(r *http.Request) error {
			tok, err := srv.Authenticate(r)
			return uiRefusal(r, tok, err)
		},
		Reaches: func(r *http.Request, id string) bool {
			tok, err := srv.Authenticate(r)
			if err != nil || !tok.Allows(id) {
				return false
			}
			_, err = srv.Store().Host(r.Context(), id)
			return err == nil
		},
		CookieName:     sessionCookie,
		SecureCookie:   secure,
		OldCookieNames: oldSessionCookies,
	})
	ui.Register(mux)
	srv.SetSessionEnded(ui.ClearSession)

	terms := webterm.Handler(webterm.Config{
		Keep:      s.Config.terminalKeep(),
		Handshake: gateway.RequireWebSocket,
		// By the token's id: names need not be unique (token create
		// --name takes one already used), and two tokens of one name
		// shared the resume check and the bound on kept terminals.
		Authorize: func(w http.ResponseWriter, r *http.Request, id string) (webterm.Caller, bool) {
			tok, _, ok := srv.Caller(w, r)
			if ok {
				srv.Audit(r, tok, id, "pty")
			}
			return webterm.Caller{ID: tok.ID, Name: tok.Name}, ok
		},
		// A terminal lives only as long as its caller's token. Its
		// connection names the browser's address to the host.
		Bind: func(ctx context.Context, r *http.Request, id string) (context.Context, func()) {
			ctx = srv.WithCaller(ctx, r)
			tok, err := srv.Authenticate(r)
			if err != nil {
				c, cancel := context.WithCancelCause(ctx)
				// Expired between Authorize and now. A revocation in that
				// moment is answered from the gateway's token cache; Live's
				// recheck cuts the terminal instead.
				cancel(err)
				return c, func() {}
			}
			return srv.Live(ctx, tok, "pty", id)
		},
		Why: terminalEndedWhy,
		Spawn: func(ctx context.Context, id, name string, argv []string, pty *hostgate.PTY) (hostgate.Process, func(), error) {
			c, lost, err := hc.DialLost(ctx, id, name)
			if err != nil {
				return nil, nil, terminalDialError(srv, id, err)
			}
			p, err := c.Spawn(ctx, argv, hostgate.SpawnOptions{PTY: pty})
			if err != nil {
				_ = c.Close()
				return nil, nil, err
			}
			return &terminalProcess{Process: p, lost: lost}, func() { _ = c.Close() }, nil
		},
		// The page's Origin is --public-url's, which behind a proxy that
		// passes Host without its port (nginx's `proxy_set_header Host
		// $host`) is not the request's Host.
		OriginPatterns: publicOriginPatterns(s.Config.PublicURL),
		Logger:         s.Logger.With("component", "webterm"),
	})
	mux.Handle("GET /v1/hosts/{id}/pty", terms)
	registerTerminalMetrics(srv.Metrics(), terms.Stats)

	signer := previewSigner(s.Config.StateDir, s.Logger.With("component", "preview"))
	shares, err := newGatewayShares(ctx, srv.Store(), func(ctx context.Context, id string) (bool, error) {
		_, ok, err := srv.LiveToken(ctx, id)
		return ok, err
	})
	if err != nil {
		terms.Close()
		hc.Close()
		return nil, err
	}
	// An ended execution's share rows went with its host record; its
	// shares in memory go now, not when next looked up.
	s.OnHostForgotten(shares.forgetHost)
	// The gateway's own pages' origin behind a proxy that passes Host
	// without its port, as the terminal's OriginPatterns.
	publicOrigins := publicOriginPatterns(s.Config.PublicURL)
	gatewayOrigin := func(r *http.Request) string {
		return gatewayOriginFor(s.Config.PublicURL, s.Config.PreviewDomain, r)
	}
	// previewOrigin is a preview's subdomain-form origin in the scheme
	// browsers reach the gateway by, --public-url's.
	previewOrigin := func(r *http.Request, hostID string, port int, domain string) string {
		return previewOriginFor(s.Config.PublicURL, r, hostID, port, domain)
	}
	resolveHost := hostResolver(srv.Store(), shares)
	// subdomainReaches reports whether the subdomain form of hostID's
	// previews reaches it: a DNS label carries the id, and no other host's
	// id differs from it only in case. Links use the path form otherwise.
	// A host not enrolled (yet), or a failed lookup, keeps the subdomain.
	subdomainReaches := func(ctx context.Context, hostID string) bool {
		if s.Config.PreviewDomain == "" || !forward.SubdomainCarries(hostID) {
			return false
		}
		id, err := resolveHost(ctx, strings.ToLower(hostID))
		var amb *forward.AmbiguousHostError
		return !errors.As(err, &amb) && (err != nil || id == hostID)
	}
	preview, err := forward.NewPreview(func(ctx context.Context, hostID string, port int) (net.Conn, error) {
		c, err := hc.Get(ctx, hostID)
		if err != nil {
			// What the API's answers say too: a sandbox whose execution
			// ended, an agent refused and who can fix it.
			var sentinel error
			switch {
			case errors.Is(err, gateway.ErrUnknownHost):
				sentinel = forward.ErrUnknownHost
			case errors.Is(err, gateway.ErrHostOffline):
				sentinel = forward.ErrHostUnavailable
			default:
				return nil, err
			}
			return nil, hostGoneError(srv, hostID, sentinel, err)
		}
		// Early: the request goes behind the channel open, and a port
		// nobody listens on fails the round trip, which the proxy answers
		// with the same 502 page. localhost, not 127.0.0.1: a dev server
		// started on localhost may listen on ::1 alone (Vite under Node
		// 17 and later, where the host's resolver puts ::1 first), and the
		// agent dials localhost's 127.0.0.1, then its ::1.
		return c.DialEarly(ctx, "tcp", net.JoinHostPort("localhost", strconv.Itoa(port)))
	}, &forward.PreviewConfig{
		Domain:      s.Config.PreviewDomain,
		Shares:      shares,
		ResolveHost: resolveHost,
		// A store that cannot answer (or cannot yet tell a live token
		// from a revoked one) is undecided: 503, not a login page for a
		// browser whose credentials may be good.
		Authorize: func(r *http.Request, hostID string, port int) (bool, string, error) {
			var undecided error
			// Path form: the gateway's own origin, where the session
			// cookie (or a bearer token) is. A subdomain preview takes a
			// bearer token alone: the session cookie is host-only on the
			// gateway, so one sent here was planted by a page on some
			// preview (Domain= the preview domain), and looking it up
			// counted a failure against the viewer's address on every
			// request, until everything from there was refused 429.
			// Nor a bearer token a browser sends (fetch metadata): a
			// page on the preview's origin set that header itself, same-
			// origin and so without a preflight (an app's JWT for its
			// API, or a hostile page's junk), and the same count locked
			// the viewer out. An API client sends no fetch metadata.
			tok, err := store.Token{}, errNoPreviewSession
			_, _, sub := forward.ParseSubdomain(r.Host, s.Config.PreviewDomain)
			if pa, ok := r.Context().Value(pathAuthKey{}).(pathAuth); ok && !sub {
				tok, err = pa.tok, pa.err // the /preview/ route's
			} else if !sub || gateway.Bearer(r) != "" && r.Header.Get("Sec-Fetch-Site") == "" {
				tok, err = srv.Authenticate(r)
			}
			if err == nil && tok.Allows(hostID) &&
				// A bearer token, not any Authorization: a browser adds
				// Basic credentials by itself (cached for the origin, a
				// WebSocket URL's userinfo), and the session cookie,
				// which Authenticate then took, rode along past
				// cookieUseAllowed.
				(gateway.Bearer(r) != "" || cookieUseAllowed(r, publicOrigins)) {
				return true, "", nil
			}
			if gateway.StoreUnavailable(err) {
				undecided = err
			}
			// Subdomain form: the preview origin's own cookie, as long as
			// the token it was minted for lives (revoked or expired, it
			// stops working within a second, as the token does).
			//
			// Each cookie of that name, not the first: a page on any
			// preview can plant one for the whole preview domain, with a
			// longer path so that browsers send it first, and the
			// viewer's own was never looked at (a login loop). A planted
			// one is signed for none of the viewer's previews.
			if previewCookieUseAllowed(r, hostID, s.Config.PreviewDomain) {
				for i, c := range r.CookiesNamed(previewCookie) {
					if i == maxPreviewCookies {
						break
					}
					id, err := signer.CheckCookie(c.Value, hostID, port)
					if err != nil {
						continue
					}
					_, ok, err := srv.LiveToken(r.Context(), id)
					if ok {
						return true, "", nil
					}
					if err != nil {
						undecided = err
					}
				}
			}
			if err == nil && undecided == nil && gateway.Bearer(r) != "" {
				// An API client whose token is good but does not cover
				// the host: 403 saying so, where a 401 said to log in.
				return false, "", previewForbidden(tok, hostID)
			}
			login := gatewayOrigin(r) + "/preview-login?host=" + url.QueryEscape(hostID) + "&port=" + strconv.Itoa(port) +
				"&next=" + url.QueryEscape(r.URL.RequestURI())
			if s.Config.PreviewDomain == "" || !strings.Contains(strings.ToLower(r.Host), "."+s.Config.PreviewDomain) {
				login = "/login?next=" + url.QueryEscape(r.URL.RequestURI())
				if err != nil {
					// Saying why, as a UI page's redirect does: a login
					// that ended (its cookie cleared by the /preview/
					// route), or two session cookies, one planted by a
					// page under a parent domain, which logging in again
					// leaves in place (the login led back here, saying
					// nothing, for ever).
					login = ui.LoginURL(r, uiRefusal(r, tok, err), r.URL.RequestURI())
				}
				if err == nil && !tok.Allows(hostID) {
					// Logged in, with a token for other hosts: the login
					// page says why it shows (it showed as if logged out,
					// and the same token led back to it).
					login = "/login?error=host_forbidden&next=" + url.QueryEscape(r.URL.RequestURI())
				}
			}
			return false, login, undecided
		},
		// A round trip that broke off: the dev server's doing, or its
		// host's agent went (stopped, restarted, lost its network).
		HostLost: func(ctx context.Context, hostID string) error {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostProbeTimeout)
			defer cancel()
			c, err := hc.Get(ctx, hostID)
			if err == nil {
				if err = hostAnswers(ctx, c); err == nil {
					return nil
				}
			}
			if ctx.Err() != nil {
				return nil // not known: the page says what the proxy saw
			}
			return hostGoneError(srv, hostID, forward.ErrHostUnavailable, err)
		},
		// The pages' way back, to the gateway's origin: on a preview
		// origin "/" is the dev server's.
		HomeURL:       func(r *http.Request) string { return gatewayOrigin(r) + "/" },
		Redeem:        redeemTicket(signer, srv.LiveToken),
		SessionCookie: sessionCookie,
		PreviewCookie: previewCookie,
		SecureCookie:  secure,
		// The viewer, as --trusted-proxy's X-Forwarded-For names them: the
		// proxy's address told a dev server every viewer was local.
		ClientIP: srv.ClientIP,
		Logger:   s.Logger.With("component", "preview"),
	})
	if err != nil {
		terms.Close()
		hc.Close()
		return nil, err
	}
	// In the path form a browser gets the page alone: it runs sandboxed in
	// an opaque origin, so every request it makes (module scripts, styles,
	// images, fetch, hot reload) is cross-site, and the session cookie
	// serves none of them (cookieUseAllowed). A Vite page opened there
	// stayed blank. A viewer logged in here who opens it goes on to the
	// subdomain form through the login flow instead, where the page runs
	// whole; API clients, public-share viewers and hosts no subdomain
	// reaches keep the path form.
	mux.Handle("/preview/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not on a subdomain preview's origin (a path under /preview/ of
		// the dev server's own): a session cookie there was planted by a
		// page of that origin, and looking it up counted a failure
		// against the viewer's address at each navigation, until
		// everything from there was refused 429.
		_, _, onPreview := forward.ParseSubdomain(r.Host, s.Config.PreviewDomain)
		if onPreview {
			preview.ServeHTTP(w, r)
			return
		}
		// The path form, on the gateway's origin: authenticated once,
		// here, for the preview's Authorize too (each look-up of a stale
		// cookie counts a failure; a page load counted two). A session
		// cookie the gateway no longer honours is cleared, as every
		// other route's 401 clears it: left, the browser sent it on each
		// request, until its address was refused as rate-limited, the
		// login that followed too.
		tok, err := srv.Authenticate(r)
		if gateway.CredentialsRefused(err) && gateway.Bearer(r) == "" {
			ui.ClearSession(w, r)
		}
		r = r.WithContext(context.WithValue(r.Context(), pathAuthKey{}, pathAuth{tok, err}))
		if s.Config.PreviewDomain != "" && safeTopNavigation(r) && r.Header.Get("Authorization") == "" {
			if hostID, port, rest, ok := forward.ParsePreviewPath(r.URL.EscapedPath(), "/preview/"); ok {
				if err == nil && tok.Allows(hostID) && subdomainReaches(r.Context(), hostID) {
					if r.URL.RawQuery != "" {
						rest += "?" + r.URL.RawQuery
					}
					http.Redirect(w, r, "/preview-login?host="+url.QueryEscape(hostID)+"&port="+strconv.Itoa(port)+"&next="+url.QueryEscape(rest), http.StatusFound)
					return
				}
			}
		}
		preview.ServeHTTP(w, r)
	}))
	srv.SetFront(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.Config.PreviewDomain != "" && preview.Match(r) && !strings.HasPrefix(r.URL.Path, "/preview/") {
				preview.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	})

	// The subdomain login flow starts on the gateway's origin, where the
	// session cookie is: mint a ticket bound to host and port and send the
	// browser to the preview origin, which trades it for its own cookie.
	mux.HandleFunc("GET /preview-login", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		hostID, next := q.Get("host"), q.Get("next")
		port, err := strconv.Atoi(q.Get("port"))
		// The preview's pages, as on the rest of the way to a preview: a
		// person who followed an edited or cut link read a line of plain
		// text ("bad preview login request") with no next step.
		if s.Config.PreviewDomain == "" {
			preview.WritePage(w, r, http.StatusNotFound, "not_found", "No preview login here.",
				"This gateway has no preview domain (gateway serve --preview-domain), so there is no preview origin to log in to: open previews at /preview/{host}/{port}/.")
			return
		}
		if err != nil || port < 1 || port > 65535 || !store.ValidHostID(hostID) {
			preview.WritePage(w, r, http.StatusBadRequest, "bad_request", "This preview login link is incomplete.",
				"It needs a host id and a port from 1 to 65535 (/preview-login?host=ID&port=PORT); open the preview again from the gateway.")
			return
		}
		if !topNavigation(r) {
			// A ticket becomes a cookie on the preview's origin: a page
			// on another preview subdomain (same-site, so the session
			// cookie comes along) must not mint one in the background
			// and then use it.
			http.Error(w, "preview login is only for opening a preview in the browser", http.StatusForbidden)
			return
		}
		tok, err := srv.Authenticate(r)
		if err != nil {
			// As the UI's pages: a session cookie the gateway no longer
			// honours is cleared, and the login page says why. Left, the
			// browser sent it on each preview link followed, each a failed
			// authentication against its address, until its login was
			// refused as rate-limited.
			ui.SendToLogin(w, r, uiRefusal(r, tok, err), r.URL.RequestURI())
			return
		}
		if !tok.Allows(hostID) {
			// A person who followed a preview's link: the preview's page,
			// which says who can change it (it was a line of plain text).
			preview.WritePage(w, r, http.StatusForbidden, "forbidden", "Your token cannot reach host "+hostID+".",
				"It covers other hosts. Log out and log in with a token for "+hostID+", which an admin makes with gateway token create --role client --host "+hostID+".")
			return
		}
		next = redirect.LocalPath(next)
		if !subdomainReaches(r.Context(), hostID) {
			// No subdomain leads to this host (an id no DNS label
			// carries, or one that differs from another only in
			// case): the path form, where the session cookie is.
			http.Redirect(w, r, "/preview/"+hostID+"/"+strconv.Itoa(port)+next, http.StatusFound)
			return
		}
		// Bound to the token's id: the preview cookie it becomes lives
		// only as long as the token.
		ticket := signer.Ticket(tok.ID, hostID, port, ticketTTL)
		target := previewOrigin(r, hostID, port, s.Config.PreviewDomain) + "/.hostgate/auth?ticket=" + url.QueryEscape(ticket) + "&next=" + url.QueryEscape(next)
		http.Redirect(w, r, target, http.StatusFound)
	})

	routeShares(mux, srv, shares, func(r *http.Request, hostID string, port int) (string, string) {
		pathURL := gatewayOrigin(r) + "/preview/" + hostID + "/" + strconv.Itoa(port) + "/"
		if s.Config.PreviewDomain == "" {
			return pathURL, ""
		}
		if !subdomainReaches(r.Context(), hostID) {
			// A subdomain link would lead nowhere.
			return pathURL, pathURL
		}
		return pathURL, previewOrigin(r, hostID, port, s.Config.PreviewDomain) + "/"
	})

	return func() { terms.Close(); preview.Close(); hc.Close() }, nil
}

// uiRefusal is, for the web UI (webui.Config.Authenticated), why
// Authenticate's answer (tok, err) to r lets it into no page; nil when it
// does.
func uiRefusal(r *http.Request, tok store.Token, err error) error {
	switch {
	case gateway.CredentialsRefused(err) && gateway.Bearer(r) == "":
		// The session cookie's: cleared. A bearer token is the
		// client's to drop, and clearing then would end a good cookie.
		return fmt.Errorf("%w: %w", webui.ErrSessionEnded, err)
	case gateway.RateLimited(err):
		return fmt.Errorf("%w: %w", webui.ErrTooManyLogins, err)
	case gateway.StoreUnavailable(err):
		return fmt.Errorf("%w: %w", webui.ErrUnavailable, err)
	case gateway.TwoSessionCookies(err):
		return fmt.Errorf("%w: %w", webui.ErrTwoSessions, err)
	case err != nil:
		return err
	case tok.Role == store.RoleAgent:
		return fmt.Errorf("%w: an agent token cannot use the web UI", webui.ErrAgentLogin)
	}
	return nil
}

// previewFormAction is the CSP source of every preview subdomain of domain,
// on any port, or "" when there is no preview domain or it holds
// characters no DNS name does (a CSP source must not carry them).
func previewFormAction(domain string) string {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if domain == "" {
		return ""
	}
	for i := 0; i < len(domain); i++ {
		if c := domain[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return ""
		}
	}
	return "*." + domain + ":*"
}

// terminalProcess is a web terminal's shell: a Wait that failed because
// the host's tunnel ended says so, and what the person can do, for the
// page shows Wait's error.
type terminalProcess struct {
	hostgate.Process
	lost func() error
}

func (p *terminalProcess) Wait() error {
	err := p.Process.Wait()
	var ee *hostgate.ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	if why := p.lost(); why != nil {
		if errors.Is(why, gateway.ErrExecutionEnded) {
			return why // a reload finds it gone: why says to start a new sandbox
		}
		return fmt.Errorf("%w; its shell ended: reload the page for a new terminal", why)
	}
	return err
}

// Resize passes the page's size on: the embedded Process alone would hide
// it from webterm.
func (p *terminalProcess) Resize(cols, rows int) error {
	rz, ok := p.Process.(hostgate.Resizer)
	if !ok {
		return errors.ErrUnsupported
	}
	return rz.Resize(cols, rows)
}

// SetOutputWindow passes the page's window on to the SSH session
// (webterm.Windower), which the embedded Process alone would hide.
func (p *terminalProcess) SetOutputWindow(n int) {
	if w, ok := p.Process.(webterm.Windower); ok {
		w.SetOutputWindow(n)
	}
}

// publicOriginPatterns is --public-url's host, port included, as an origin
// pattern (path.Match syntax, its special characters escaped: an IPv6
// literal's brackets). A port that is the scheme's default is left out,
// as browsers leave it out of Origin: https://gw.example.com:443's pages
// send Origin https://gw.example.com.
func publicOriginPatterns(publicURL string) []string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`).Replace(originHost(u))}
}

// originHost is u's host as a browser's Origin names it: without the
// scheme's default port.
func originHost(u *url.URL) string {
	if p := u.Port(); u.Scheme == "https" && p == "443" || u.Scheme == "http" && p == "80" {
		return strings.TrimSuffix(u.Host, ":"+p)
	}
	return u.Host
}

// publicOrigins is --public-url's origin as browsers send it in Origin,
// for http.CrossOriginProtection.AddTrustedOrigin; none without one.
func publicOrigins(publicURL string) []string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	return []string{strings.ToLower(u.Scheme + "://" + originHost(u))}
}

// hostResolver returns the preview's ResolveHost: the host a subdomain's
// lower-cased label names. When the store cannot answer (and has no recent
// answer), a public share of a host of that label resolves it: it names
// its host, and nothing else its requests need comes from the store (its
// token's state is a snapshot that outlives an outage, as the path form
// relies on). Two shared hosts of one label stay the store's error.
func hostResolver(st store.Store, shares *gatewayShares) func(ctx context.Context, label string) (string, error) {
	return func(ctx context.Context, label string) (string, error) {
		ids, err := st.HostIDsFold(ctx, label)
		if err != nil {
			if id, ok := shares.hostFold(ctx, label); ok {
				return id, nil
			}
			return "", err
		}
		switch len(ids) {
		case 0:
			return "", fmt.Errorf("%w: %s", forward.ErrUnknownHost, label)
		case 1:
			return ids[0], nil
		}
		return "", &forward.AmbiguousHostError{Label: label, IDs: ids}
	}
}

// gatewayOriginFor is the origin that links made for r lead to the
// gateway by: --public-url's, unless it names no address a browser can
// open. Without --public-url it is http:// and --listen's address, which
// for every address (--listen :8080) is [::] or 0.0.0.0: a viewer's own
// machine, or nothing, to a browser, so a subdomain preview's login and
// its pages' link back to the host list led nowhere. Then the gateway's
// own pages keep the name r came by, and a preview's, where r.Host names
// the preview, the address r's connection reached.
func gatewayOriginFor(publicURL, previewDomain string, r *http.Request) string {
	u, err := url.Parse(strings.TrimRight(publicURL, "/"))
	if err != nil || u.Host == "" {
		u = &url.URL{Scheme: "http"}
		if r.TLS != nil {
			u.Scheme = "https"
		}
	} else if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsUnspecified() {
		return u.Scheme + "://" + u.Host
	}
	host := r.Host
	if _, _, sub := forward.ParseSubdomain(r.Host, previewDomain); sub || host == "" {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Zone() == "" {
				host = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
			}
		}
	}
	return u.Scheme + "://" + host
}

// previewOriginFor is the subdomain preview's origin, on the port the
// request came in on, or publicURL's when its Host names none. The scheme is publicURL's when it is set: behind the
// TLS-terminating proxy a deployment runs, r.TLS is nil though browsers
// speak https, and an http:// origin would send the login ticket in clear
// to a port where the proxy speaks TLS.
func previewOriginFor(publicURL string, r *http.Request, hostID string, port int, domain string) string {
	scheme := "http"
	if u, err := url.Parse(publicURL); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	} else if r.TLS != nil {
		scheme = "https"
	}
	h := forward.SubdomainHost(hostID, port, domain)
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		h = net.JoinHostPort(h, p)
	} else if u, err := url.Parse(publicURL); err == nil && u.Port() != "" {
		// A proxy that passes Host without its port (nginx's
		// `proxy_set_header Host $host`) sent the ticket to the scheme's
		// default port, where nothing listens.
		h = net.JoinHostPort(h, u.Port())
	}
	return scheme + "://" + h
}

// topNavigation reports whether r is a top-level navigation, or from a
// client that sends no fetch metadata (not a browser, or an old one).
func topNavigation(r *http.Request) bool {
	mode := r.Header.Get("Sec-Fetch-Mode")
	return mode == "" || mode == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// safeTopNavigation reports whether r is a top-level GET or HEAD
// navigation: a link followed from another page. A form posted from
// another site navigates too, and SameSite=Lax lets the cookie ride along
// when that site is a preview subdomain.
// hostProbeTimeout bounds asking a host whether it is still there after a
// preview's round trip broke off: a connection that ended answers at once,
// a live one in a round trip; one gone silent is not waited for.
const hostProbeTimeout = 5 * time.Second

// hostAnswers sends c's host a keepalive, as sshlayer's keepalives do:
// nil when it answers (with failure or success alike), the connection's
// error when it has ended, nil when ctx ends first (not known).
func hostAnswers(ctx context.Context, c *sshlayer.Client) error {
	done := make(chan error, 1)
	go func() {
		_, _, err := c.SSH().SendRequest("keepalive@openssh.com", true, nil)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

func safeTopNavigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// previewCookieUseAllowed reports whether a subdomain-form preview request
// may be authorized by that preview origin's own cookie. Every preview
// subdomain is same-site with every other, and any host's owner writes
// the pages there: a page on one host's preview could otherwise send
// requests into, and open WebSockets to, another host's previews with the
// viewer's cookie for them. Allowed: requests from the preview's own
// origin, top-level GET navigations, clients without fetch metadata, and
// requests whose Origin is a preview of the same host (a dev frontend on
// one port calling its backend on another).
func previewCookieUseAllowed(r *http.Request, hostID, domain string) bool {
	upgrade := r.Header.Get("Upgrade") != ""
	origin := r.Header.Get("Origin")
	sameHost := false
	if u, err := url.Parse(origin); err == nil && origin != "" {
		id, _, ok := forward.ParseSubdomain(u.Host, domain)
		sameHost = ok && id == strings.ToLower(hostID)
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "":
		// No fetch metadata (an older browser): its Origin, when it
		// sends one (a POST, a CORS request, a WebSocket), says whose
		// page asks.
		return origin == "" || sameHost
	case "same-origin", "none":
		return !upgrade || origin == "" || sameHost
	default:
		return sameHost || !upgrade && safeTopNavigation(r)
	}
}

// pathAuthKey carries a path-form preview request's authentication
// (pathAuth) from the /preview/ route, which made it, to the preview's
// Authorize.
type pathAuthKey struct{}

// pathAuth is Authenticate's answer to a path-form preview request.
type pathAuth struct {
	tok store.Token
	err error
}

// errNoPreviewSession is a subdomain preview's Authenticate, skipped:
// there the session cookie is none of the gateway's, and a bearer token
// from a browser is the page's own.
var errNoPreviewSession = errors.New("no bearer token from an API client: a subdomain preview takes no session cookie, nor a bearer token a browser's page sends")

// cookieUseAllowed reports whether a path-form preview request may be
// authorized by the session cookie alone. The cookie is SameSite=Lax, and
// preview subdomains, pages any host's owner writes, are same-site with
// the gateway: a page there could have a logged-in admin's browser open
// WebSockets to (which no CORS check guards), or send requests into,
// every other host's previews. Top-level navigations stay allowed (a link
// to a preview), as do requests from the gateway's own origin and from
// clients that send no fetch metadata; a WebSocket needs the gateway's
// own origin (or none), as /pty and /ssh do. The own origin is the
// request's Host or one of own (publicOriginPatterns): behind a proxy
// that passes Host without its port (nginx's `proxy_set_header Host
// $host`, the README's) on a port other than the scheme's, the page's
// Origin names a port r.Host does not.
func cookieUseAllowed(r *http.Request, own []string) bool {
	upgrade := r.Header.Get("Upgrade") != ""
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		// A top-level navigation only: a frame navigates too, and a
		// preview subdomain must not frame another host's preview with
		// the admin's session under it.
		if upgrade || !safeTopNavigation(r) {
			return false
		}
	}
	// A WebSocket's Origin, and that of a browser that sends no fetch
	// metadata (an older one) but an Origin (a POST, a CORS request).
	if o := r.Header.Get("Origin"); o != "" && (upgrade || r.Header.Get("Sec-Fetch-Site") == "") {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" {
			return false
		}
		if !strings.EqualFold(u.Host, r.Host) && !slices.ContainsFunc(own, func(p string) bool {
			ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host))
			return ok
		}) {
			return false
		}
	}
	return true
}

// redeemTicket is the preview's Redeem: a login ticket becomes a preview
// cookie for as long as the token that asked for it lives. The ticket is
// consumed only once that token is known to live: a store that cannot
// tell yet answers 503 (forward.ErrUnavailable) and leaves the ticket good
// for the retry the answer asks for; consumed first, the retry got 401
// "invalid or expired".
func redeemTicket(signer *previewauth.Signer, live func(ctx context.Context, id string) (store.Token, bool, error)) func(ctx context.Context, ticket, hostID string, port int) (string, time.Time, error) {
	return func(ctx context.Context, ticket, hostID string, port int) (string, time.Time, error) {
		id, err := signer.Peek(ticket, hostID, port)
		if err != nil {
			return "", time.Time{}, err
		}
		tok, ok, err := live(ctx, id)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("%w: %w", forward.ErrUnavailable, err)
		}
		if !ok {
			return "", time.Time{}, errors.New("the token that asked for this preview was revoked or has expired")
		}
		if _, err := signer.Redeem(ticket, hostID, port); err != nil {
			return "", time.Time{}, err
		}
		ttl := previewCookieTTL
		if !tok.ExpiresAt.IsZero() {
			ttl = min(ttl, time.Until(tok.ExpiresAt))
		}
		v, exp := signer.Cookie(id, hostID, port, ttl)
		return v, exp, nil
	}
}

// terminalDialError words, for the person at a terminal page, why host id
// could not be reached and what to do; the page shows it after "cannot
// start a terminal on ID: ". It said "gateway: host offline", the Go
// error, where the API names the cause (an ended sandbox, an agent
// refused) and the fix.
func terminalDialError(srv *gateway.Server, id string, err error) error {
	if !errors.Is(err, gateway.ErrHostOffline) && !errors.Is(err, gateway.ErrUnknownHost) {
		return err
	}
	switch ended, why := srv.OfflineReason(id); {
	case ended:
		return fmt.Errorf("%s: start a new sandbox", why)
	case why != "":
		return fmt.Errorf("its agent is not connected to the gateway; %s", why)
	case errors.Is(err, gateway.ErrUnknownHost):
		return errors.New("no such host: the hosts list at / shows those you can open")
	}
	return errors.New("its agent is not connected to the gateway: start it on the host (agent connect), then reload this page")
}

// terminalEndedWhy words why a web terminal was ended from outside for the
// person at its page: a login that ended (a logout in another tab, the
// token revoked or expired) showed "gateway: the session's token was
// revoked or expired", and a reload asks for the login again.
func terminalEndedWhy(cause error) string {
	if errors.Is(cause, gateway.ErrTokenRevoked) {
		return "the login that opened it ended (logged out, revoked or expired): reload the page to log in again"
	}
	return cause.Error()
}

// hostGoneError is a preview's error for host hostID, which the gateway
// could not reach (err, marked sentinel), with what it knows of why: an
// ended execution's reason and time, which its 410 carries as the API's
// gone answers do, or its agent's last refusal.
func hostGoneError(srv *gateway.Server, hostID string, sentinel, err error) *forward.HostGoneError {
	why, reason, at := srv.OfflineCause(hostID)
	return &forward.HostGoneError{Err: fmt.Errorf("%w: %w", sentinel, err), Ended: reason != "", Why: why, Reason: reason, EndedAt: at}
}
