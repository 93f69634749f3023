package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/store"
)

// gatewayShares is the gateway's share store. Shares live in memory for
// the preview's per-request lookup and are written through to the store,
// so they outlive a restart until their expiry (one gateway serves a state
// dir, so the memory is never stale). A share lasts only as long as the
// token that made it: revoked or expired, its shares stop within the
// token snapshot's second, as its sessions and preview cookies do. One
// made from a browser login lasts only as long as that session too: a
// logout ends it at once, as it ends the preview cookies the session
// opened, so a stolen session cookie cannot publish ports that outlive
// the victim's logout.
type gatewayShares struct {
	mem   *forward.MemoryShares
	store store.Store
	// live reports whether the token (or session) with this id is
	// still valid; an error says that is not known (the store has not
	// listed tokens yet), which must never end a share.
	live func(ctx context.Context, tokenID string) (bool, error)

	// mu orders the writes: a share ended because its token died must
	// not take with it one that replaced it meanwhile.
	mu sync.Mutex

	// seen holds sameHost's recent yeses, by host and share, for
	// sameHostTTL.
	seenMu sync.Mutex
	seen   map[seenKey]time.Time
}

type seenKey struct {
	host    string
	created int64 // the share's Created, in ns
}

// sameHostTTL is how long sameHost trusts a yes: it read the store (the
// host, and an execution's tombstone) at every request to a shared port,
// 15 µs and 42 allocations, 150 times the rest of the lookup
// (BenchmarkShareLookup), and a public page's every asset is one. A host
// removed or an execution ended stops its shares within it, as a revoked
// token stops opening anything within the auth cache's second.
const sameHostTTL = time.Second

// maxSeen bounds seen; a full one starts over.
const maxSeen = 4096

var _ forward.ShareStore = (*gatewayShares)(nil)

// newGatewayShares loads the stored shares into memory. The store leaves
// out the expired ones and those whose token is gone.
func newGatewayShares(ctx context.Context, st store.Store, live func(context.Context, string) (bool, error)) (*gatewayShares, error) {
	g := &gatewayShares{mem: forward.NewMemoryShares(nil), store: st, live: live}
	stored, err := st.Shares(ctx)
	if err != nil {
		return nil, fmt.Errorf("load shares: %w", err)
	}
	for _, sh := range stored {
		// An error here is a share that expired since the query.
		_ = g.mem.Put(ctx, forward.Share{HostID: sh.HostID, Port: sh.Port, Expires: sh.Expires, By: sh.By, TokenID: sh.TokenID, Session: sh.Session, Created: sh.Created})
	}
	return g, nil
}

// maxSharesPerToken bounds the live shares one token (with the sessions
// logged in with it) holds, so that one client cannot take the whole cap
// of 10,000 and leave every other user "too many shares".
const maxSharesPerToken = 1000

// errTokenShares is a Put past maxSharesPerToken.
var errTokenShares = fmt.Errorf("%w of one token", forward.ErrTooManyShares)

// errNoHost is a Put for a host not enrolled: a share lasts only as long
// as its host (sameHost), so one made before would never work.
var errNoHost = errors.New("no such host")

func (g *gatewayShares) Put(ctx context.Context, sh forward.Share) error {
	if ok, err := g.sameHostStored(ctx, sh); err != nil || !ok {
		return cmp.Or(err, errNoHost)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	held := func() int {
		return g.mem.Count(func(o forward.Share) bool {
			return o.TokenID == sh.TokenID && (o.HostID != sh.HostID || o.Port != sh.Port)
		})
	}
	if sh.TokenID != "" && held() >= maxSharesPerToken {
		// Those of hosts removed by another process (gateway host
		// remove) held their place until something looked them up; an
		// ended execution's leave at once (forgetHost).
		if err := g.pruneLocked(ctx); err != nil {
			return err
		}
		if held() >= maxSharesPerToken {
			return errTokenShares
		}
	}
	err := g.mem.Put(ctx, sh)
	if errors.Is(err, forward.ErrTooManyShares) {
		// Shares of revoked or expired tokens held their place until
		// something looked them up: a user who revoked tokens got "too
		// many shares" with none alive. End them, and try again.
		if perr := g.pruneLocked(ctx); perr != nil {
			return perr
		}
		err = g.mem.Put(ctx, sh)
	}
	if err != nil {
		return err
	}
	err = g.store.PutShare(ctx, store.Share{HostID: sh.HostID, Port: sh.Port, TokenID: sh.TokenID, Session: sh.Session, By: sh.By, Created: sh.Created, Expires: sh.Expires})
	if err != nil {
		_ = g.mem.Delete(ctx, sh.HostID, sh.Port)
	}
	return err
}

func (g *gatewayShares) Delete(ctx context.Context, hostID string, port int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deleteLocked(ctx, hostID, port)
}

func (g *gatewayShares) deleteLocked(ctx context.Context, hostID string, port int) error {
	// The store first: a share deleted from memory only would come back
	// at the next start.
	if err := g.store.DeleteShare(ctx, hostID, port); err != nil {
		return err
	}
	return g.mem.Delete(ctx, hostID, port)
}

func (g *gatewayShares) Lookup(ctx context.Context, hostID string, port int) (forward.Share, bool, error) {
	sh, ok, err := g.mem.Lookup(ctx, hostID, port)
	if err != nil || !ok {
		return forward.Share{}, false, err
	}
	// The hot path (a public page's every asset): a host's yes may be a
	// second old.
	if ok, err := g.alive(ctx, sh, true); err != nil || !ok {
		return forward.Share{}, false, err
	}
	return sh, true, nil
}

// forgetHost drops from memory the shares of hostID, whose record and
// share rows the store deleted together (DeleteHost).
func (g *gatewayShares) forgetHost(hostID string) {
	ctx := context.Background()
	g.mu.Lock()
	defer g.mu.Unlock()
	all, err := g.mem.List(ctx)
	if err != nil {
		return
	}
	for _, sh := range all {
		if sh.HostID == hostID {
			_ = g.mem.Delete(ctx, sh.HostID, sh.Port)
		}
	}
}

// hostFold returns the host of the unexpired shares whose id equals label
// under ASCII case folding, if there is exactly one such host.
func (g *gatewayShares) hostFold(ctx context.Context, label string) (string, bool) {
	all, err := g.mem.List(ctx)
	if err != nil {
		return "", false
	}
	var id string
	for _, sh := range all {
		if !strings.EqualFold(sh.HostID, label) || sh.HostID == id {
			continue
		}
		if id != "" {
			return "", false
		}
		id = sh.HostID
	}
	return id, id != ""
}

// List returns the live shares; while whether their tokens live is not
// known, an error (never a share of a revoked token).
func (g *gatewayShares) List(ctx context.Context) ([]forward.Share, error) {
	all, err := g.mem.List(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, sh := range all {
		ok, err := g.alive(ctx, sh, false)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sh)
		}
	}
	return out, nil
}

// alive reports whether sh's token, and the session that made it if one
// did, still live, ending the share when either does not. Shares made
// before shares carried their token have no id and last until their
// expiry. Not knowing is an error, and ends nothing. Cached takes a yes
// sameHost gave within sameHostTTL.
func (g *gatewayShares) alive(ctx context.Context, sh forward.Share, cached bool) (bool, error) {
	ok, err := g.owned(ctx, sh, cached)
	if err != nil || ok {
		return ok, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.endDeadLocked(ctx, sh)
	return false, nil
}

// owned reports whether sh's token and session (each when it names one)
// live, and whether the host it was made for is still the one its id
// names.
func (g *gatewayShares) owned(ctx context.Context, sh forward.Share, cached bool) (bool, error) {
	for _, id := range []string{sh.TokenID, sh.Session} {
		if id == "" {
			continue
		}
		if ok, err := g.live(ctx, id); err != nil || !ok {
			return false, err
		}
	}
	if !cached {
		return g.sameHostStored(ctx, sh)
	}
	return g.sameHost(ctx, sh)
}

// sameHost reports whether sh's host is enrolled, and was when sh was
// made (a yes is trusted for sameHostTTL). A share of an execution ends with it, however it ends (a DELETE,
// its runtime, its runtime while no gateway ran): the end forgets its
// host (execapi's Forget, or Prune at the next start). One left behind
// for up to its 7 days would publish the same port of whatever next took
// the id: ids of ended executions are refused only while their
// tombstones last, the newest 100,000, and a machine's id is free again
// after gateway host remove.
func (g *gatewayShares) sameHost(ctx context.Context, sh forward.Share) (bool, error) {
	k := seenKey{sh.HostID, sh.Created.UnixNano()}
	now := time.Now()
	g.seenMu.Lock()
	at, ok := g.seen[k]
	g.seenMu.Unlock()
	if ok && now.Sub(at) < sameHostTTL {
		return true, nil
	}
	yes, err := g.sameHostStored(ctx, sh)
	if yes && err == nil {
		g.seenMu.Lock()
		if g.seen == nil || len(g.seen) >= maxSeen {
			g.seen = map[seenKey]time.Time{}
		}
		g.seen[k] = now
		g.seenMu.Unlock()
	}
	return yes, err
}

// sameHostStored is sameHost as the store answers it now.
func (g *gatewayShares) sameHostStored(ctx context.Context, sh forward.Share) (bool, error) {
	h, err := g.store.Host(ctx, sh.HostID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// Both in the store's milliseconds after a restart.
	if h.CreatedAt.After(sh.Created) {
		return false, nil
	}
	// An execution's host is forgotten a moment after it ends; its
	// tombstone is written as it ends.
	ts, ok := g.store.(tombstones)
	if h.Kind != store.KindDocker || !ok {
		return true, nil
	}
	_, _, ended, err := ts.LookupTombstone(ctx, sh.HostID)
	return !ended, err
}

// tombstones is the store's record of ended executions
// (dockerhost.Tombstones).
type tombstones interface {
	LookupTombstone(ctx context.Context, id string) (time.Time, string, bool, error)
}

// endDeadLocked ends sh, whose token or host is gone, unless another share of its
// port replaced it meanwhile. g.mu is held.
func (g *gatewayShares) endDeadLocked(ctx context.Context, sh forward.Share) {
	cur, ok, _ := g.mem.Lookup(ctx, sh.HostID, sh.Port)
	if !ok || cur.TokenID != sh.TokenID || cur.Session != sh.Session || !cur.Created.Equal(sh.Created) {
		return // ended already, or replaced
	}
	_ = g.deleteLocked(context.WithoutCancel(ctx), sh.HostID, sh.Port)
}

// pruneLocked ends every share whose token is revoked or expired, or
// whose host is gone (sameHost). It
// ends nothing and returns an error while that is not known. g.mu is
// held.
func (g *gatewayShares) pruneLocked(ctx context.Context) error {
	all, err := g.mem.List(ctx)
	if err != nil {
		return err
	}
	for _, sh := range all {
		ok, err := g.owned(ctx, sh, false)
		if err != nil {
			return err
		}
		if !ok {
			g.endDeadLocked(ctx, sh)
		}
	}
	return nil
}

// shareJSON is a share as the API shows it.
func shareJSON(sh forward.Share, urls func(hostID string, port int) (pathURL, url string)) map[string]any {
	pathURL, u := urls(sh.HostID, sh.Port)
	out := map[string]any{"hostId": sh.HostID, "port": sh.Port, "expiresAt": sh.Expires.UTC(), "createdAt": sh.Created.UTC(),
		"by": sh.By, "pathUrl": pathURL}
	if u != "" {
		out["url"] = u
	}
	if sh.Session != "" {
		// The session's end ends the share: this names which one
		// (`gateway token list --sessions`, `gateway token revoke ID`).
		out["session"] = sh.Session
	}
	return out
}

// routeShares adds the shares API: an admin or the host's client makes one
// port public until an expiry, lists a host's shares, and ends one.
// urls gives a share's path-form URL and, with a preview domain, its
// subdomain URL.
func routeShares(mux *http.ServeMux, srv *gateway.Server, shares forward.ShareStore, urls func(r *http.Request, hostID string, port int) (pathURL, url string)) {
	mux.HandleFunc("POST /v1/hosts/{id}/shares", func(w http.ResponseWriter, r *http.Request) {
		tok, id, ok := srv.Caller(w, r)
		if !ok {
			return
		}
		var body struct {
			Port       int   `json:"port"`
			TTLSeconds int64 `json:"ttlSeconds"`
		}
		if !gateway.DecodeStrictBody(w, r, &body) {
			return
		}
		if body.Port < 1 || body.Port > 65535 {
			gateway.WriteError(w, http.StatusBadRequest, "bad_request", "port: want 1-65535")
			return
		}
		// Checked as a count of seconds: a Duration of a huge count wraps.
		if body.TTLSeconds < 1 || body.TTLSeconds > int64(maxShareTTL/time.Second) {
			gateway.WriteError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("ttlSeconds: want 1-%d", int64(maxShareTTL/time.Second)))
			return
		}
		// A share made from a browser login counts against the token
		// logged in with (its cap of shares), and ends with the session:
		// a stolen session cookie must not publish ports that outlive
		// the victim's logout.
		owner, session := tok.ID, ""
		if tok.Parent != "" {
			owner, session = tok.Parent, tok.ID
		}
		now := time.Now()
		expires := now.Add(time.Duration(body.TTLSeconds) * time.Second)
		if !tok.ExpiresAt.IsZero() && tok.ExpiresAt.Before(expires) {
			// It ends with its token (or session) anyway: expiresAt
			// says when.
			expires = tok.ExpiresAt
		}
		sh := forward.Share{HostID: id, Port: body.Port, Expires: expires,
			By: tok.Name, TokenID: owner, Session: session, Created: now}
		if err := shares.Put(r.Context(), sh); err != nil {
			if errors.Is(err, errNoHost) {
				if srv.HostGone(w, id) {
					return
				}
				gateway.WriteError(w, http.StatusNotFound, "not_found", "host "+id+" is not enrolled: a share is of an enrolled host's port, and ends when the host is removed or, for a sandbox, when its execution ends; share it once its agent has connected")
				return
			}
			if errors.Is(err, errTokenShares) {
				gateway.WriteError(w, http.StatusConflict, "too_many_shares", fmt.Sprintf("this token holds %d shares, the most one token may: end some with DELETE /v1/hosts/{id}/shares/{port}", maxSharesPerToken))
				return
			}
			if errors.Is(err, forward.ErrTooManyShares) {
				gateway.WriteError(w, http.StatusConflict, "too_many_shares", "too many shares: end some with DELETE /v1/hosts/{id}/shares/{port}")
				return
			}
			gateway.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "state store unavailable: the share was not made: "+err.Error())
			return
		}
		srv.Audit(r, tok, id, "share")
		gateway.WriteJSON(w, http.StatusCreated, shareJSON(sh, func(h string, p int) (string, string) { return urls(r, h, p) }))
	})
	mux.HandleFunc("GET /v1/hosts/{id}/shares", func(w http.ResponseWriter, r *http.Request) {
		_, id, ok := srv.Caller(w, r)
		if !ok {
			return
		}
		all, err := shares.List(r.Context())
		if err != nil {
			gateway.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "state store unavailable: "+err.Error())
			return
		}
		out := []map[string]any{}
		for _, sh := range all {
			if sh.HostID == id {
				out = append(out, shareJSON(sh, func(h string, p int) (string, string) { return urls(r, h, p) }))
			}
		}
		// An ended sandbox's shares end with it, and a mistyped id has
		// none: an empty list said nothing of either. Asked only then, as
		// asking costs a store read.
		if len(out) == 0 && srv.HostAbsent(r.Context(), w, id) {
			return
		}
		gateway.WriteJSON(w, http.StatusOK, map[string]any{"shares": out})
	})
	// Idempotent, as DELETE /v1/executions/{id} is: an ended sandbox's
	// share ended with it, so ending it again is done (204), not gone.
	mux.HandleFunc("DELETE /v1/hosts/{id}/shares/{port}", func(w http.ResponseWriter, r *http.Request) {
		_, id, ok := srv.Caller(w, r)
		if !ok {
			return
		}
		port, err := strconv.Atoi(r.PathValue("port"))
		if err != nil || port < 1 || port > 65535 {
			gateway.WriteError(w, http.StatusBadRequest, "bad_request", "port: want 1-65535")
			return
		}
		if err := shares.Delete(r.Context(), id, port); err != nil {
			gateway.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "state store unavailable: the share was not removed: "+err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
