// Package store keeps the gateway's durable state: hosts with their pinned
// host keys, hashed API tokens with role and host scope (and the browser
// login sessions minted from them), public shares of hosts' ports, an audit
// log of sessions and a record of key resets.
//
// Store is the seam for a shared database when several gateway replicas run
// (PostgreSQL); Open gives the embedded SQLite implementation, which is safe
// to use from several processes on one file (the CLI creates tokens while
// the gateway serves).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Role is what a token may do.
type Role string

// The token roles of the wire contract.
const (
	// RoleAdmin reaches every host and the executions API.
	RoleAdmin Role = "admin"
	// RoleClient reaches the hosts the token names.
	RoleClient Role = "client"
	// RoleAgent enrolls the one host the token names.
	RoleAgent Role = "agent"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleClient || r == RoleAgent }

// Exported errors callers branch on.
var (
	ErrNotFound = errors.New("store: not found")
	// ErrKeyMismatch means a host came back with a host key other than the
	// pinned one; an admin must reset the key first.
	ErrKeyMismatch = errors.New("store: host key does not match the pinned key")
	// ErrExpired means a token exists but is past its expiry.
	ErrExpired = errors.New("store: token expired")
	// ErrTokenGone refuses an enrollment whose agent token
	// (Enrollment.Token) was revoked or has expired.
	ErrTokenGone = errors.New("store: the enrolling agent token was revoked or has expired")
	// ErrSessionParent refuses a browser session minted from another
	// session: its secret only ever sits in a browser's cookie, so whoever
	// types it in took it from there, and a session of their own would
	// outlive the victim's logout.
	ErrSessionParent = errors.New("store: a login session cannot start another session; log in with the API token")
)

// MaxSessionsPerToken bounds the live browser sessions of one token;
// CreateSession drops the oldest beyond it. A person logs in from a few
// browsers and profiles, and a session not logged out of lives until its
// TTL (12 hours by default), so 16 leaves room for every device someone
// uses in a day while keeping each token to 16 rows, which the gateway
// lists every second to check live sessions and preview cookies.
const MaxSessionsPerToken = 16

// KindDocker is the kind of an execution's host: a Docker sandbox, whose
// agent never forwards an SSH agent (code in a sandbox must not sign with
// the caller's keys).
const KindDocker = "docker"

// Host is an enrolled host.
type Host struct {
	ID   string
	Kind string
	// Info is the host's hostgate.Info as JSON, as the agent sent it.
	Info json.RawMessage
	// HostKey is the pinned host public key in authorized_keys form
	// ("ssh-ed25519 AAAA…"); empty after a reset until the next enrollment.
	HostKey   string
	CreatedAt time.Time
	LastSeen  time.Time
}

// Token is a token's metadata; the secret itself is never stored.
type Token struct {
	ID   string
	Name string
	Role Role
	// Hosts scopes client and agent tokens; an agent token names exactly
	// one host. Admin tokens ignore it.
	Hosts     []string
	CreatedAt time.Time
	// ExpiresAt is zero for a token that does not expire.
	ExpiresAt time.Time
	// Parent is, for a browser login session (CreateSession), the id of
	// the token it was minted from; empty for a token made by
	// CreateToken. Deleting the parent deletes its sessions.
	Parent string
}

// Allows reports whether the token may reach host id as a caller.
func (t Token) Allows(hostID string) bool {
	if t.Role == RoleAdmin {
		return true
	}
	if t.Role != RoleClient {
		return false
	}
	for _, h := range t.Hosts {
		if h == hostID {
			return true
		}
	}
	return false
}

// TokenSpec describes a token to create.
type TokenSpec struct {
	Name      string // optional: defaults to "<role>-<id>"
	Role      Role
	Hosts     []string
	ExpiresAt time.Time // zero: never
}

// Session is one audit-log entry: a caller reached a host.
type Session struct {
	Time       time.Time
	TokenName  string
	HostID     string
	Kind       string // "ssh", "certificate", "pty", …
	RemoteAddr string
}

// Enrollment is what an agent presents when it connects.
type Enrollment struct {
	HostID string
	Kind   string
	// Info is the host's self-description; empty keeps what a known host
	// has stored (its kind too), and is {} for a new one.
	Info    json.RawMessage
	HostKey string // authorized_keys form
	// Token is the id of the agent token the enrollment comes with;
	// when set, Enroll fails with ErrTokenGone unless that token exists
	// and has not expired, in the same transaction: a token revoked
	// while its agent's connection was under way (the gateway trusts a
	// token that authenticated a moment ago) enrolls nothing.
	Token string
}

// Share is a port of a host made public until Expires (the gateway's
// shares API). It lasts only as long as the token that made it, and one
// made from a browser login only as long as that session.
type Share struct {
	HostID  string
	Port    int
	TokenID string // the token that made it (a session's parent)
	// Session is the browser login session (a token whose Parent is
	// TokenID) that made it; empty for a share made with the token.
	Session string
	By      string // that token's name, for audit
	Created time.Time
	Expires time.Time
}

// UnreadableTokensError is Tokens' error when some token rows could not be
// read. Tokens still returns every token it could: one bad row must not
// stop the gateway from seeing the others (revocations would stop being
// enforced) nor an operator from listing and revoking them. Whether the
// tokens in IDs live is unknown; `gateway token revoke ID` removes one.
type UnreadableTokensError struct {
	IDs []string
	Err error // the first row's error
}

func (e *UnreadableTokensError) Error() string {
	return fmt.Sprintf("store: %d token row(s) cannot be read (%s): %v; revoke them with `gateway token revoke ID`", len(e.IDs), strings.Join(e.IDs, ", "), e.Err)
}

func (e *UnreadableTokensError) Unwrap() error { return e.Err }

// Store is the gateway's state. Implementations are safe for concurrent use.
type Store interface {
	// CreateToken makes a new token and returns its secret, which is shown
	// once and stored only as a SHA-256 hash.
	CreateToken(ctx context.Context, spec TokenSpec) (secret string, tok Token, err error)
	// LookupToken finds the token for secret: ErrNotFound when unknown,
	// ErrExpired when past its expiry.
	LookupToken(ctx context.Context, secret string) (Token, error)
	// Token returns the token with id: ErrNotFound when there is none,
	// ErrExpired (with the token) when past its expiry.
	Token(ctx context.Context, id string) (Token, error)
	// Tokens lists every token's metadata. Rows it cannot read (a
	// damaged or hand-edited database) do not hide the others: it returns
	// every token it could read with an *UnreadableTokensError naming
	// the rest.
	Tokens(ctx context.Context) ([]Token, error)
	// DeleteToken revokes a token by id, and the sessions minted from it.
	DeleteToken(ctx context.Context, id string) error
	// CreateSession mints a browser login session for the token with id
	// parent: a token of its own, with the parent's role and hosts,
	// expiring at ttl from now or at the parent's expiry if sooner, so a
	// logout can revoke it without touching the parent. It removes
	// expired sessions and keeps the parent's newest MaxSessionsPerToken
	// (this one included). ErrNotFound or ErrExpired for the parent;
	// ErrSessionParent when the parent is itself a session.
	CreateSession(ctx context.Context, parent string, ttl time.Duration) (secret string, tok Token, err error)

	// Host returns one host or ErrNotFound.
	Host(ctx context.Context, id string) (Host, error)
	// Hosts lists hosts ordered by id.
	Hosts(ctx context.Context) ([]Host, error)
	// HostIDsFold lists, ordered, the ids of the hosts whose id equals id
	// under ASCII case folding: a preview subdomain, which browsers
	// lower-case, finds its host by them. It runs on every subdomain
	// preview request, so an implementation may answer from a cache
	// (SQLite's: at most a second old, and never older than this store's
	// own Enroll or DeleteHost of an id of that label).
	HostIDsFold(ctx context.Context, id string) ([]string, error)
	// Enroll records an agent's connection: the first key seen for a host
	// (or the first after a reset) is pinned; another key fails with
	// ErrKeyMismatch and changes nothing. Kind, info and last-seen are
	// updated on success.
	Enroll(ctx context.Context, e Enrollment) (Host, error)
	// ResetHostKey forgets a host's pinned key so the next enrollment pins
	// a new one, and records the reset. ErrNotFound for an unknown host.
	ResetHostKey(ctx context.Context, id, by string) error
	// DeleteHost forgets host id — its pinned key and info — when its kind
	// is kind (an ended Docker execution, never a machine by mistake),
	// and its shares, in one transaction. Deleting a missing host is not
	// an error (its shares go). The audit log keeps its entries.
	DeleteHost(ctx context.Context, id, kind string) error
	// RecordSession appends to the audit log.
	RecordSession(ctx context.Context, s Session) error
	// Sessions returns the newest audit entries first, at most limit.
	Sessions(ctx context.Context, limit int) ([]Session, error)

	// PutShare records a share, replacing the one of its host and port.
	PutShare(ctx context.Context, s Share) error
	// DeleteShare removes a share; a missing one is not an error.
	DeleteShare(ctx context.Context, hostID string, port int) error
	// Shares returns the shares not yet expired whose token (if they
	// name one) and session (if a session made them) still exist and
	// have not expired, by host and port; it deletes the others.
	Shares(ctx context.Context) ([]Share, error)

	// Ping checks that the store answers (readiness).
	Ping(ctx context.Context) error
	// CheckWrite checks that the store takes a write now (readiness: a
	// full disk fails writes while reads go on), leaving nothing behind.
	// A write refused by the disk is a *WriteError.
	CheckWrite(ctx context.Context) error
	Close() error
}
