package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// SQLite is the embedded Store: one database file, WAL mode, so readers
// never block the writer and a second process (the CLI) can write while the
// gateway runs; busy_timeout makes concurrent writers wait instead of
// failing.
type SQLite struct {
	db   *sql.DB
	path string // the database file, for errors that ask the operator to act on it
	now  func() time.Time
	// lookupToken is prepared once: every authenticated request runs it
	// (each request of a preview page too), and SQLite would parse the
	// statement again each time.
	lookupToken *sql.Stmt
	tombstones  atomic.Int64 // AddTombstone calls, for its trims
	audits      atomic.Int64 // RecordSession calls, for its trims
	auditKeep   int64        // audit rows kept: MaxAuditRows, less in tests
	auditBatch  int64        // audit rows one trim transaction deletes: auditTrimBatch, less in tests
	hostIDs     hostIDsCache // HostIDsFold's recent answers
	tightened   []TightenedFile
}

// Tightened is the files of the database whose permissions Open took
// group and others off.
func (s *SQLite) Tightened() []TightenedFile { return s.tightened }

var _ Store = (*SQLite)(nil)

// Open opens (creating when needed) the SQLite database at path and brings
// its schema up to date. It creates the database 0600, and makes any of
// its files that group or others may read or write its owner's alone
// (Tightened says which, for the caller to log).
func Open(ctx context.Context, path string) (*SQLite, error) {
	return open(ctx, path, false)
}

// OpenRead opens the existing database at path for a command that only
// reads it (gateway token list, audit): it neither upgrades the schema nor
// writes (its connections are query_only). Upgrading is the gateway's to
// do as it starts: a newly installed binary's read, run before the
// gateway's restart, upgraded the schema under the older gateway still
// serving it, which refuses a newer schema when it restarts (an operator's
// rollback). A schema older than this binary's is refused
// (*OlderSchemaError), since this binary's queries may need what its
// migrations add.
func OpenRead(ctx context.Context, path string) (*SQLite, error) {
	return open(ctx, path, true)
}

func open(ctx context.Context, path string, readOnly bool) (*SQLite, error) {
	tightened, err := protect(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if readOnly {
		// journal_mode is the file's, set by the gateway; setting it
		// is a write.
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	// BEGIN IMMEDIATE takes the write lock up front, so two writers queue
	// on busy_timeout instead of one failing at lock upgrade.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", fileURI(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	s := &SQLite{db: db, path: path, now: time.Now, tightened: tightened}
	if readOnly {
		return s.openRead(ctx)
	}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		if we := writeErr(path, err, true); we != err {
			return nil, we
		}
		if ue := unreadable(path, err); ue != nil {
			return nil, ue
		}
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	// Outside the migrations, so that the schema version stays what an
	// older gateway accepts (it ignores the index): HostIDsFold runs on
	// every subdomain preview request.
	if _, err := db.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS hosts_id_nocase ON hosts (id COLLATE NOCASE)`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: index: %w", path, err)
	}
	if s.lookupToken, err = db.PrepareContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: prepare: %w", path, err)
	}
	// AddTombstone trims every thousandth call, which a gateway that
	// restarts often may never reach.
	if err := s.trimTombstones(ctx, maxTombstones); err != nil {
		_ = s.Close()
		if we := writeErr(path, err, true); we != err {
			return nil, we
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// A failed trim must not keep the gateway from starting (the log may
	// have filled the disk it needs): the next RecordSession's tries again
	// and its error reaches the gateway's log.
	_ = s.trimAudit(ctx)
	// CreateSession prunes too, but a gateway nobody logs in to again
	// would keep the last sessions' rows.
	if _, err := s.db.ExecContext(ctx, pruneSessions, ms(s.now())); err != nil {
		_ = s.Close()
		if we := writeErr(path, err, true); we != err {
			return nil, we
		}
		return nil, fmt.Errorf("store: open %s: prune sessions: %w", path, err)
	}
	return s, nil
}

// openRead is OpenRead's after the database is open: the schema version
// checked, the one statement prepared, and none of Open's upkeep (the
// index, trims, prunes), which writes.
func (s *SQLite) openRead(ctx context.Context) (*SQLite, error) {
	var v int
	err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	switch {
	case err != nil:
	case v > len(migrations):
		err = &newerSchemaError{have: v, know: len(migrations)}
	case v < len(migrations):
		_ = s.db.Close()
		return nil, &OlderSchemaError{Path: s.path, Have: v, Want: len(migrations)}
	default:
		s.lookupToken, err = s.db.PrepareContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`)
	}
	if err != nil {
		_ = s.db.Close()
		if ue := unreadable(s.path, err); ue != nil {
			return nil, ue
		}
		return nil, fmt.Errorf("store: open %s: %w", s.path, err)
	}
	return s, nil
}

// OlderSchemaError is OpenRead's refusal of a database whose schema an
// older gateway made and this binary has not upgraded.
type OlderSchemaError struct {
	Path       string
	Have, Want int
}

func (e *OlderSchemaError) Error() string {
	return fmt.Sprintf("store: %s has schema version %d, older than this binary's %d: the gateway serving it (or that last served it) is an older version. Restart the gateway with this binary first (it upgrades the schema as it starts), or run this command with the gateway's own binary; this command does not upgrade it, so that the running gateway, or a rollback to it, keeps a schema it knows",
		e.Path, e.Have, e.Want)
}

// uriPath escapes what a SQLite URI's path gives meaning to.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// fileURI is the SQLite URI of the database file at path. Unescaped, a
// '#' or '?' in the path (a state dir's name) cut it short, so SQLite
// opened, and created 0644, a file outside the state dir, and a '%' made
// the open fail.
func fileURI(path string) string { return "file:" + uriPath.Replace(path) }

// Ping implements Store.
func (s *SQLite) Ping(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *SQLite) Close() error {
	return errors.Join(s.lookupToken.Close(), s.db.Close())
}

// migrations are applied in order; PRAGMA user_version records how many
// ran. Append only: never edit a released migration.
var migrations = []string{
	`CREATE TABLE hosts (
		id TEXT PRIMARY KEY,
		kind TEXT NOT NULL DEFAULT '',
		info TEXT NOT NULL DEFAULT '{}',
		host_key TEXT NOT NULL DEFAULT '',
		created_ms INTEGER NOT NULL,
		last_seen_ms INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE tokens (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		hash TEXT NOT NULL UNIQUE,
		role TEXT NOT NULL CHECK (role IN ('admin','client','agent')),
		hosts TEXT NOT NULL DEFAULT '[]',
		created_ms INTEGER NOT NULL,
		expires_ms INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE sessions (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ms INTEGER NOT NULL,
		token_name TEXT NOT NULL,
		host_id TEXT NOT NULL,
		kind TEXT NOT NULL,
		remote_addr TEXT NOT NULL
	);
	CREATE TABLE key_resets (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ms INTEGER NOT NULL,
		host_id TEXT NOT NULL,
		old_key TEXT NOT NULL,
		by TEXT NOT NULL
	);`,
	// Ended Docker executions, so that they answer gone (410) rather than
	// not found after a restart (dockerhost.Tombstones).
	`CREATE TABLE gone_executions (
		id TEXT PRIMARY KEY,
		at_ms INTEGER NOT NULL
	);
	CREATE INDEX gone_executions_at ON gone_executions (at_ms);`,
	// Public shares of a host's port, so that they outlive a restart
	// until their expiry, as the API promised.
	`CREATE TABLE shares (
		host_id TEXT NOT NULL,
		port INTEGER NOT NULL,
		token_id TEXT NOT NULL DEFAULT '',
		by TEXT NOT NULL DEFAULT '',
		created_ms INTEGER NOT NULL,
		expires_ms INTEGER NOT NULL,
		PRIMARY KEY (host_id, port)
	);`,
	// Browser login sessions are tokens minted from another (CreateSession):
	// a cookie then holds a secret a logout can revoke, never the API token
	// itself. The cascade revokes a token's sessions with it, also when
	// `gateway token revoke` (another process) deletes it. ADD COLUMN keeps
	// every existing row, which gets NULL: a token of its own. The index
	// serves the cascade and the per-token cap.
	`ALTER TABLE tokens ADD COLUMN parent_id TEXT REFERENCES tokens (id) ON DELETE CASCADE;
	CREATE INDEX tokens_parent ON tokens (parent_id);`,
	// Why each execution ended (dockerhost's End* reasons), which its gone
	// answers say; '' for those an older gateway recorded.
	`ALTER TABLE gone_executions ADD COLUMN reason TEXT NOT NULL DEFAULT '';`,
}

// maxTombstones bounds the ended executions remembered; the oldest go
// first.
const maxTombstones = 100_000

// AddTombstone records an execution that ended at at for reason
// (dockerhost.Tombstones). Every thousandth call, and Open, trim the table
// to about maxTombstones.
func (s *SQLite) AddTombstone(ctx context.Context, id string, at time.Time, reason string) (err error) {
	defer s.wrote(&err)
	if _, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO gone_executions (id, at_ms, reason) VALUES (?, ?, ?)`, id, ms(at), reason); err != nil {
		return fmt.Errorf("store: add tombstone: %w", err)
	}
	if s.tombstones.Add(1)%1000 != 0 {
		return nil
	}
	return s.trimTombstones(ctx, maxTombstones)
}

// trimTombstones keeps the newest keep tombstones (and any that tie with
// the oldest of them): a delete by the at_ms index, not a sort of the table
// (12 ms against 300 at 100,000 rows).
func (s *SQLite) trimTombstones(ctx context.Context, keep int) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM gone_executions WHERE at_ms <
		(SELECT at_ms FROM gone_executions ORDER BY at_ms DESC LIMIT 1 OFFSET ?)`, keep-1)
	if err != nil {
		return fmt.Errorf("store: trim tombstones: %w", err)
	}
	return nil
}

// RemoveTombstone forgets an ended execution whose id is used again.
func (s *SQLite) RemoveTombstone(ctx context.Context, id string) (err error) {
	defer s.wrote(&err)
	if _, err := s.db.ExecContext(ctx, `DELETE FROM gone_executions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: remove tombstone: %w", err)
	}
	return nil
}

// LookupTombstone returns when the recorded ended execution id ended and
// why; ok is false when id is not recorded (dockerhost.Tombstones).
func (s *SQLite) LookupTombstone(ctx context.Context, id string) (at time.Time, reason string, ok bool, err error) {
	var atMS int64
	err = s.db.QueryRowContext(ctx, `SELECT at_ms, reason FROM gone_executions WHERE id = ?`, id).Scan(&atMS, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, "", false, nil
	}
	if err != nil {
		return time.Time{}, "", false, fmt.Errorf("store: look up tombstone: %w", err)
	}
	return fromMS(atMS), reason, true, nil
}

// PutShare implements Store.
func (s *SQLite) PutShare(ctx context.Context, sh Share) (err error) {
	defer s.wrote(&err)
	if !ValidHostID(sh.HostID) || sh.Port < 1 || sh.Port > 65535 {
		return fmt.Errorf("store: invalid share %s:%d", sh.HostID, sh.Port)
	}
	// A session's share names the session in token_id: Shares finds its
	// token through the session's parent_id, and the prune that ends the
	// shares of a deleted or expired token ends it with the session, here
	// and in a gateway from before shares named their session. No new
	// column, so the schema stays one an older gateway opens.
	owner := sh.TokenID
	if sh.Session != "" {
		owner = sh.Session
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO shares (host_id, port, token_id, by, created_ms, expires_ms) VALUES (?,?,?,?,?,?)`,
		sh.HostID, sh.Port, owner, sh.By, ms(sh.Created), ms(sh.Expires))
	if err != nil {
		return fmt.Errorf("store: put share: %w", err)
	}
	return nil
}

// DeleteShare implements Store.
func (s *SQLite) DeleteShare(ctx context.Context, hostID string, port int) (err error) {
	defer s.wrote(&err)
	if _, err := s.db.ExecContext(ctx, `DELETE FROM shares WHERE host_id = ? AND port = ?`, hostID, port); err != nil {
		return fmt.Errorf("store: delete share: %w", err)
	}
	return nil
}

// Shares implements Store: the expired ones, and those whose token or
// session is gone (revoked or logged out, also by another process) or
// expired, are deleted first.
// Shares made before shares carried their token (an empty token_id) last
// until their expiry.
func (s *SQLite) Shares(ctx context.Context) ([]Share, error) {
	now := ms(s.now())
	if _, err := s.db.ExecContext(ctx, `DELETE FROM shares WHERE expires_ms <= ? OR (token_id != '' AND token_id NOT IN
		(SELECT id FROM tokens WHERE expires_ms = 0 OR expires_ms > ?))`, now, now); err != nil {
		return nil, fmt.Errorf("store: prune shares: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT s.host_id, s.port, s.token_id, COALESCE(t.parent_id, ''), s.by, s.created_ms, s.expires_ms
		FROM shares s LEFT JOIN tokens t ON t.id = s.token_id AND s.token_id != '' ORDER BY s.host_id, s.port`)
	if err != nil {
		return nil, fmt.Errorf("store: shares: %w", err)
	}
	defer rows.Close()
	var out []Share
	for rows.Next() {
		var (
			sh               Share
			parent           string
			created, expires int64
		)
		if err := rows.Scan(&sh.HostID, &sh.Port, &sh.TokenID, &parent, &sh.By, &created, &expires); err != nil {
			return nil, fmt.Errorf("store: shares: %w", err)
		}
		if parent != "" {
			sh.Session, sh.TokenID = sh.TokenID, parent
		}
		sh.Created, sh.Expires = fromMS(created), fromMS(expires)
		out = append(out, sh)
	}
	return out, rows.Err()
}

func (s *SQLite) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return &newerSchemaError{have: v, know: len(migrations)}
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if v < len(migrations) {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// CreateToken implements Store.
func (s *SQLite) CreateToken(ctx context.Context, spec TokenSpec) (_ string, _ Token, err error) {
	defer s.wrote(&err)
	if !spec.Role.Valid() {
		return "", Token{}, fmt.Errorf("store: unknown role %q", spec.Role)
	}
	for _, h := range spec.Hosts {
		if !ValidHostID(h) {
			return "", Token{}, fmt.Errorf("store: invalid host id %q: %s", h, HostIDRule)
		}
	}
	if err := checkTokenName(spec.Name); err != nil {
		return "", Token{}, err
	}
	if spec.Role == RoleAgent && len(spec.Hosts) != 1 {
		return "", Token{}, errors.New("store: an agent token names exactly one host")
	}
	if spec.Role == RoleAdmin {
		spec.Hosts = nil
	}
	tok := Token{ID: newID(), Name: spec.Name, Role: spec.Role, Hosts: spec.Hosts,
		CreatedAt: s.now().Truncate(time.Millisecond), ExpiresAt: spec.ExpiresAt}
	if tok.Name == "" {
		tok.Name = string(spec.Role) + "-" + tok.ID
	}
	if tok.Hosts == nil {
		tok.Hosts = []string{}
	}
	hosts, _ := json.Marshal(tok.Hosts)
	secret := newSecret()
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO tokens (id, name, hash, role, hosts, created_ms, expires_ms) VALUES (?,?,?,?,?,?,?)`,
		tok.ID, tok.Name, HashToken(secret), string(tok.Role), string(hosts), ms(tok.CreatedAt), ms(tok.ExpiresAt))
	if err != nil {
		return "", Token{}, fmt.Errorf("store: create token: %w", err)
	}
	return secret, tok, nil
}

const tokenCols = `id, name, role, hosts, created_ms, expires_ms, COALESCE(parent_id, '')`

func scanToken(sc interface{ Scan(...any) error }) (Token, error) {
	var (
		t               Token
		role, hosts     string
		created, expire int64
	)
	if err := sc.Scan(&t.ID, &t.Name, &role, &hosts, &created, &expire, &t.Parent); err != nil {
		return Token{}, err
	}
	t.Role = Role(role)
	if err := json.Unmarshal([]byte(hosts), &t.Hosts); err != nil {
		return Token{}, fmt.Errorf("token %s hosts: %w", t.ID, err)
	}
	t.CreatedAt, t.ExpiresAt = fromMS(created), fromMS(expire)
	return t, nil
}

// LookupToken implements Store.
func (s *SQLite) LookupToken(ctx context.Context, secret string) (Token, error) {
	if !wellFormed(secret) {
		return Token{}, ErrNotFound
	}
	row := s.lookupToken.QueryRowContext(ctx, HashToken(secret))
	t, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("store: lookup token: %w", err)
	}
	if !t.ExpiresAt.IsZero() && !s.now().Before(t.ExpiresAt) {
		return t, ErrExpired
	}
	return t, nil
}

// Token implements Store.
func (s *SQLite) Token(ctx context.Context, id string) (Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("store: token %s: %w", id, err)
	}
	if !t.ExpiresAt.IsZero() && !s.now().Before(t.ExpiresAt) {
		return t, ErrExpired
	}
	return t, nil
}

// Tokens implements Store.
func (s *SQLite) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	defer rows.Close()
	var (
		out []Token
		bad *UnreadableTokensError
	)
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			// Scanning into any cannot fail: the row's id, to name it.
			var id string
			var rest [6]any
			if rows.Scan(&id, &rest[0], &rest[1], &rest[2], &rest[3], &rest[4], &rest[5]) != nil {
				return nil, fmt.Errorf("store: tokens: %w", err)
			}
			if bad == nil {
				bad = &UnreadableTokensError{Err: err}
			}
			bad.IDs = append(bad.IDs, id)
			continue
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}

// DeleteToken implements Store.
func (s *SQLite) DeleteToken(ctx context.Context, id string) (err error) {
	defer s.wrote(&err)
	res, err := s.db.ExecContext(ctx, `DELETE FROM tokens WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// pruneSessions deletes the sessions expired at ?, the time in ms. Every
// session expires (CreateSession), so expires_ms is never 0 here.
const pruneSessions = `DELETE FROM tokens WHERE parent_id IS NOT NULL AND expires_ms <= ?`

// CreateSession implements Store. Checking the parent, pruning, capping
// and inserting run in one immediate transaction, so two logins at once
// cannot both find room under the cap, nor a login add a session to a
// parent being revoked.
func (s *SQLite) CreateSession(ctx context.Context, parent string, ttl time.Duration) (_ string, _ Token, err error) {
	defer s.wrote(&err)
	if ttl <= 0 {
		return "", Token{}, fmt.Errorf("store: create session: ttl %v: want more than 0", ttl)
	}
	now := s.now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", Token{}, fmt.Errorf("store: create session: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	p, err := scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, parent))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", Token{}, ErrNotFound
	case err != nil:
		return "", Token{}, fmt.Errorf("store: create session: %w", err)
	case p.Parent != "":
		return "", Token{}, ErrSessionParent
	case p.Role == RoleAgent:
		return "", Token{}, errors.New("store: create session: an agent token cannot log in")
	case !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt):
		return "", Token{}, ErrExpired
	}
	if _, err := tx.ExecContext(ctx, pruneSessions, ms(now)); err != nil {
		return "", Token{}, fmt.Errorf("store: create session: prune: %w", err)
	}
	// Room for the new one: keep the newest MaxSessionsPerToken-1, newest
	// as made: a row's rowid is above every other's when it is inserted,
	// where created_ms, the wall clock's, put a login made after the clock
	// stepped back first in line to go.
	if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE id IN (SELECT id FROM tokens
		WHERE parent_id = ? ORDER BY rowid DESC LIMIT -1 OFFSET ?)`, p.ID, MaxSessionsPerToken-1); err != nil {
		return "", Token{}, fmt.Errorf("store: create session: cap: %w", err)
	}
	tok := Token{ID: newID(), Role: p.Role, Hosts: p.Hosts, Parent: p.ID,
		CreatedAt: now.Truncate(time.Millisecond), ExpiresAt: now.Add(ttl).Truncate(time.Millisecond)}
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Before(tok.ExpiresAt) {
		tok.ExpiresAt = p.ExpiresAt
	}
	// The parent's name first: the audit log and certificate key ids
	// name who logged in, and which of their sessions it was.
	tok.Name = p.Name + "/session-" + tok.ID
	hosts, _ := json.Marshal(tok.Hosts)
	secret := newSecret()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO tokens (id, name, hash, role, hosts, created_ms, expires_ms, parent_id) VALUES (?,?,?,?,?,?,?,?)`,
		tok.ID, tok.Name, HashToken(secret), string(tok.Role), string(hosts), ms(tok.CreatedAt), ms(tok.ExpiresAt), tok.Parent); err != nil {
		return "", Token{}, fmt.Errorf("store: create session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", Token{}, fmt.Errorf("store: create session: %w", err)
	}
	return secret, tok, nil
}

const hostCols = `id, kind, info, host_key, created_ms, last_seen_ms`

func scanHost(sc interface{ Scan(...any) error }) (Host, error) {
	var (
		h             Host
		info          string
		created, seen int64
	)
	if err := sc.Scan(&h.ID, &h.Kind, &info, &h.HostKey, &created, &seen); err != nil {
		return Host{}, err
	}
	h.Info = json.RawMessage(info)
	h.CreatedAt, h.LastSeen = fromMS(created), fromMS(seen)
	return h, nil
}

// Host implements Store.
func (s *SQLite) Host(ctx context.Context, id string) (Host, error) {
	h, err := scanHost(s.db.QueryRowContext(ctx, `SELECT `+hostCols+` FROM hosts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Host{}, ErrNotFound
	}
	if err != nil {
		return Host{}, fmt.Errorf("store: host: %w", err)
	}
	return h, nil
}

// Hosts implements Store.
func (s *SQLite) Hosts(ctx context.Context) ([]Host, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+hostCols+` FROM hosts ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: hosts: %w", err)
	}
	defer rows.Close()
	var out []Host
	for rows.Next() {
		h, err := scanHost(rows)
		if err != nil {
			return nil, fmt.Errorf("store: hosts: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// HostIDsFold implements Store. An answer is kept for a second
// (hostIDsTTL), and forgotten at once when this store enrolls or deletes
// a host of that label; while the database fails, an answer up to a
// minute old is given instead of the error.
func (s *SQLite) HostIDsFold(ctx context.Context, id string) ([]string, error) {
	key, now := foldKey(id), s.now()
	if ids, ok := s.hostIDs.get(key, now, hostIDsTTL); ok {
		return ids, nil
	}
	gen := s.hostIDs.generation()
	ids, err := s.queryHostIDsFold(ctx, id)
	if err != nil {
		if ids, ok := s.hostIDs.get(key, now, hostIDsStale); ok {
			return ids, nil
		}
		return nil, err
	}
	s.hostIDs.put(key, ids, gen, now)
	return ids, nil
}

// queryHostIDsFold is HostIDsFold's query. SQLite's NOCASE folds ASCII
// letters only, as host ids are ASCII.
func (s *SQLite) queryHostIDsFold(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM hosts WHERE id = ? COLLATE NOCASE ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("store: hosts named %s: %w", id, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, fmt.Errorf("store: hosts named %s: %w", id, err)
		}
		ids = append(ids, h)
	}
	return ids, rows.Err()
}

// Enroll implements Store. The check and the pin run in one immediate
// transaction, so two agents racing for a fresh host cannot both win.
func (s *SQLite) Enroll(ctx context.Context, e Enrollment) (_ Host, err error) {
	defer s.wrote(&err)
	if !ValidHostID(e.HostID) {
		return Host{}, fmt.Errorf("store: invalid host id %q: %s", e.HostID, HostIDRule)
	}
	if e.HostKey == "" {
		return Host{}, errors.New("store: enroll: empty host key")
	}
	info := e.Info
	keepInfo := len(info) == 0 // an enrollment that sends none keeps the stored info and kind
	if keepInfo {
		info = json.RawMessage("{}")
	}
	if !json.Valid(info) {
		return Host{}, errors.New("store: enroll: info is not JSON")
	}
	now := ms(s.now())
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Host{}, fmt.Errorf("store: enroll: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if e.Token != "" {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM tokens WHERE id = ? AND (expires_ms = 0 OR expires_ms > ?)`, e.Token, now).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return Host{}, ErrTokenGone
		}
		if err != nil {
			return Host{}, fmt.Errorf("store: enroll: %w", err)
		}
	}
	var pinned string
	err = tx.QueryRowContext(ctx, `SELECT host_key FROM hosts WHERE id = ?`, e.HostID).Scan(&pinned)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, `INSERT INTO hosts (id, kind, info, host_key, created_ms, last_seen_ms) VALUES (?,?,?,?,?,?)`,
			e.HostID, e.Kind, string(info), e.HostKey, now, now)
	case err != nil:
	case pinned != "" && pinned != e.HostKey:
		return Host{}, ErrKeyMismatch
	case keepInfo:
		_, err = tx.ExecContext(ctx, `UPDATE hosts SET host_key = ?, last_seen_ms = ? WHERE id = ?`,
			e.HostKey, now, e.HostID)
	default:
		_, err = tx.ExecContext(ctx, `UPDATE hosts SET kind = ?, info = ?, host_key = ?, last_seen_ms = ? WHERE id = ?`,
			e.Kind, string(info), e.HostKey, now, e.HostID)
	}
	if err != nil {
		return Host{}, fmt.Errorf("store: enroll: %w", err)
	}
	h, err := scanHost(tx.QueryRowContext(ctx, `SELECT `+hostCols+` FROM hosts WHERE id = ?`, e.HostID))
	if err != nil {
		return Host{}, fmt.Errorf("store: enroll: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Host{}, fmt.Errorf("store: enroll: %w", err)
	}
	// A new host must not stay "not found" to previews of its label.
	s.hostIDs.forget(e.HostID)
	return h, nil
}

// ResetHostKey implements Store.
func (s *SQLite) ResetHostKey(ctx context.Context, id, by string) (err error) {
	defer s.wrote(&err)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: reset key: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var old string
	err = tx.QueryRowContext(ctx, `SELECT host_key FROM hosts WHERE id = ?`, id).Scan(&old)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `UPDATE hosts SET host_key = '' WHERE id = ?`, id)
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO key_resets (time_ms, host_id, old_key, by) VALUES (?,?,?,?)`,
			ms(s.now()), id, old, by)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("store: reset key: %w", err)
	}
	return nil
}

// DeleteHost implements Store.
func (s *SQLite) DeleteHost(ctx context.Context, id, kind string) (err error) {
	defer s.wrote(&err)
	// Forgotten even on an error: whether the row went is not known.
	defer s.hostIDs.forget(id)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete host: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, `DELETE FROM hosts WHERE id = ? AND kind = ?`, id, kind)
	if err == nil {
		// Its shares with it, unless a host of another kind keeps the
		// id: a gateway refuses them at their next lookup (their host is
		// not the one they were made for), but their rows stayed until
		// then, up to their 7 days when no lookup came.
		_, err = tx.ExecContext(ctx, `DELETE FROM shares WHERE host_id = ? AND NOT EXISTS (SELECT 1 FROM hosts WHERE id = ?)`, id, id)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("store: delete host: %w", err)
	}
	return nil
}

// RecordSession implements Store.
func (s *SQLite) RecordSession(ctx context.Context, e Session) (err error) {
	defer s.wrote(&err)
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sessions (time_ms, token_name, host_id, kind, remote_addr) VALUES (?,?,?,?,?)`,
		ms(e.Time), e.TokenName, e.HostID, e.Kind, e.RemoteAddr)
	if err != nil {
		return fmt.Errorf("store: record session: %w", err)
	}
	if s.audits.Add(1)%1000 != 0 {
		return nil
	}
	return s.trimAudit(ctx)
}

// MaxAuditRows bounds the audit log (the sessions table): every thousandth
// RecordSession, and Open, delete all but the newest MaxAuditRows entries.
// An agent token reconnecting in a loop wrote 520 rows a second, about
// 2.5 GB a day, and nothing ever removed one; a million rows are about
// 100 MB, and days of an ordinary gateway's sessions.
const MaxAuditRows = 1_000_000

// trimAudit keeps the newest auditKeep audit rows: ids only grow
// (AUTOINCREMENT), so it is a delete by the primary key's range, in
// batches of auditTrimBatch rows, each its own transaction: one delete of
// a log grown for days (the first start that trims) wrote all of it to
// the WAL at once, 185 MB for 3 million rows.
func (s *SQLite) trimAudit(ctx context.Context) error {
	keep := s.auditKeep
	if keep <= 0 {
		keep = MaxAuditRows
	}
	var lo, hi sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(id), MAX(id) FROM sessions`).Scan(&lo, &hi); err != nil {
		return fmt.Errorf("store: trim audit log: %w", err)
	}
	batch := s.auditBatch
	if batch <= 0 {
		batch = auditTrimBatch
	}
	cut := hi.Int64 - keep // rows with id <= cut go
	for from := lo.Int64; lo.Valid && from <= cut; from += batch {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id <= ?`, min(cut, from+batch-1)); err != nil {
			return fmt.Errorf("store: trim audit log: %w", err)
		}
	}
	return nil
}

// auditTrimBatch is how many audit rows one trim transaction deletes.
const auditTrimBatch = 50_000

// Sessions implements Store.
func (s *SQLite) Sessions(ctx context.Context, limit int) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT time_ms, token_name, host_id, kind, remote_addr FROM sessions ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var (
			e Session
			t int64
		)
		if err := rows.Scan(&t, &e.TokenName, &e.HostID, &e.Kind, &e.RemoteAddr); err != nil {
			return nil, fmt.Errorf("store: sessions: %w", err)
		}
		e.Time = fromMS(t)
		out = append(out, e)
	}
	return out, rows.Err()
}
