package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

func init() {
	register("token", "token create --role admin|client|agent [--host ID]… [--name N] [--ttl D] | token list [--sessions] | token revoke ID", runToken)
}

// hostList is a repeatable --host flag (also comma-separated).
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }
func (h *hostList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*h = append(*h, p)
		}
	}
	return nil
}

const tokenUsage = `usage: gateway token create --role admin|client|agent [--host ID]… [--name N] [--ttl D] [--state-dir DIR]
       gateway token list [--sessions] [--state-dir DIR]
       gateway token revoke ID [--state-dir DIR]`

func runToken(ctx context.Context, sio stdio, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(sio.err, tokenUsage)
		return errUsage
	}
	if isHelp(args[0]) {
		fmt.Fprintln(sio.out, tokenUsage)
		return nil
	}
	switch args[0] {
	case "create":
		return tokenCreate(ctx, sio, args)
	case "list", "revoke":
		return tokenAdmin(ctx, sio, args[0], args[1:])
	}
	fmt.Fprintln(sio.err, tokenUsage)
	return errUsage
}

// tokenAdmin lists tokens (metadata only: secrets are not stored) or
// revokes one by id.
func tokenAdmin(ctx context.Context, sio stdio, verb string, args []string) error {
	var (
		dir      string
		sessions bool
	)
	fs := newFlags("token "+verb, sio)
	fs.StringVar(&dir, "state-dir", defaultStateDir(), "gateway state directory")
	if verb == "list" {
		fs.BoolVar(&sessions, "sessions", false, "also list each token's web UI login sessions, under it")
	}
	if err := parseOnlyEnv(fs, args, "state-dir"); err != nil {
		return err
	}
	want := 0
	if verb == "revoke" {
		want = 1
	}
	if fs.NArg() != want {
		fmt.Fprintln(sio.err, tokenUsage)
		return errUsage
	}
	// revoke upgrades the schema, as create does: a leaked token's
	// revoke must not wait on a restart.
	var st *store.SQLite
	var err error
	if verb == "list" {
		st, err = openReadState(ctx, dir, sio.err)
	} else {
		st, _, err = openAdminState(ctx, dir, false, sio.err)
	}
	if err != nil {
		return fmt.Errorf("token %s: %w", verb, err)
	}
	defer st.Close()
	toks, err := st.Tokens(ctx)
	// Rows the store cannot read are listed by id and can be revoked:
	// they must not lock an operator out of the others.
	var ue *store.UnreadableTokensError
	if err != nil && !errors.As(err, &ue) {
		return err
	}
	// Login sessions by parent: every web UI login adds one, so they
	// would bury the tokens an operator made.
	of := map[string][]store.Token{}
	for _, t := range toks {
		if t.Parent != "" {
			of[t.Parent] = append(of[t.Parent], t)
		}
	}
	if verb == "revoke" {
		id := fs.Arg(0)
		if ue != nil && !slices.Contains(ue.IDs, id) {
			fmt.Fprintln(sio.err, "warning:", ue)
		}
		if err := st.DeleteToken(ctx, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return revokeNotFound(ctx, st, toks, id)
			}
			return err
		}
		// A session's id revokes that login session alone: say so, and
		// whose it was, so no one takes its parent for revoked.
		if i := slices.IndexFunc(toks, func(t store.Token) bool { return t.ID == id }); i >= 0 && toks[i].Parent != "" {
			fmt.Fprintf(sio.out, "login session %s of token %s revoked (logged out); the token stays\n", id, toks[i].Parent)
			return nil
		}
		fmt.Fprintf(sio.out, "token %s revoked", id)
		if n := len(of[id]); n > 0 {
			fmt.Fprintf(sio.out, " with its %d login session(s)", n)
		}
		fmt.Fprintln(sio.out)
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(sio.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tHOSTS\tCREATED\tEXPIRES\tSESSIONS")
	row := func(id string, t store.Token, sessions string) {
		exp := "never"
		if !t.ExpiresAt.IsZero() {
			exp = t.ExpiresAt.UTC().Format(time.RFC3339)
		}
		// A column left blank (an admin token's hosts, a session's
		// count) shifted the row's later ones for a script splitting it
		// on blanks: "-", as gateway audit prints a missing host.
		hosts := strings.Join(t.Hosts, ",")
		if hosts == "" {
			hosts = "-"
		}
		if sessions == "" {
			sessions = "-"
		}
		// A name stored before names were checked (or by hand) may hold
		// a newline, tab or escape: quoted, as gateway audit quotes.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, auditField(t.Name), t.Role, hosts, t.CreatedAt.UTC().Format(time.RFC3339), exp, sessions)
	}
	for _, t := range toks {
		if t.Parent != "" {
			continue
		}
		live := 0
		for _, c := range of[t.ID] {
			if c.ExpiresAt.After(now) {
				live++
			}
		}
		row(t.ID, t, strconv.Itoa(live))
		if sessions {
			for _, c := range of[t.ID] {
				row("  "+c.ID, c, "")
			}
		}
	}
	if ue != nil {
		for _, id := range ue.IDs {
			fmt.Fprintf(tw, "%s\t(row cannot be read)\t\t\t\t\t\n", id)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if ue != nil {
		return ue
	}
	return nil
}

func tokenCreate(ctx context.Context, sio stdio, args []string) error {
	var (
		role, name, dir string
		hosts           hostList
		ttl             time.Duration
	)
	fs := newFlags("token create", sio)
	fs.StringVar(&role, "role", "", "admin, client or agent")
	fs.Var(&hosts, "host", "host id the token reaches (client, repeatable) or enrolls (agent, exactly one)")
	fs.StringVar(&name, "name", "", "name for audit logs and certificate key ids (default ROLE-ID)")
	fs.DurationVar(&ttl, "ttl", 0, "expire the token after this long (default: never)")
	fs.StringVar(&dir, "state-dir", defaultStateDir(), "gateway state directory")
	// Only --state-dir takes its default from the environment: HOSTGATE_HOST
	// and friends would silently scope tokens.
	if err := parseOnlyEnv(fs, args[1:], "state-dir"); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("token create: unexpected arguments %q", fs.Args())
	}
	r := store.Role(role)
	if !r.Valid() {
		return fmt.Errorf("token create: --role %q: want admin, client or agent", role)
	}
	if r == store.RoleAgent && len(hosts) != 1 {
		return fmt.Errorf("token create: an agent token needs exactly one --host")
	}
	if r == store.RoleClient && len(hosts) == 0 {
		return fmt.Errorf("token create: a client token needs at least one --host")
	}
	if r == store.RoleAdmin && len(hosts) != 0 {
		return fmt.Errorf("token create: an admin token reaches every host; drop --host")
	}
	if ttl < 0 {
		return fmt.Errorf("token create: negative --ttl")
	}
	spec := store.TokenSpec{Name: name, Role: r, Hosts: hosts}
	if ttl > 0 {
		spec.ExpiresAt = time.Now().Add(ttl)
	}
	st, _, err := openAdminState(ctx, dir, true, sio.err)
	if err != nil {
		return err
	}
	defer st.Close()
	secret, tok, err := st.CreateToken(ctx, spec)
	if err != nil {
		return err
	}
	caseTwins(ctx, sio, st, tok)
	fmt.Fprintf(sio.out, "# %s token %q (id %s)", tok.Role, tok.Name, tok.ID)
	if len(tok.Hosts) > 0 {
		fmt.Fprintf(sio.out, " for host %s", strings.Join(tok.Hosts, ", "))
	}
	if !tok.ExpiresAt.IsZero() {
		fmt.Fprintf(sio.out, ", expires %s", tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(sio.out, "; shown once, store it now:")
	fmt.Fprintln(sio.out, secret)
	return nil
}

// caseTwins warns of each host tok names that is not enrolled while a
// host whose id differs from it only in case is: host ids are
// case-sensitive, so a client token made for Build-01 reached nothing of
// build-01's (its holder got 404s), and an agent token enrolled a second
// host beside it, whose subdomain previews, and build-01's, then answered
// ambiguous_host (browsers lower-case the name). A host not enrolled yet
// is no mistake: tokens are made before their agents connect.
func caseTwins(ctx context.Context, sio stdio, st store.Store, tok store.Token) {
	for _, h := range tok.Hosts {
		if _, err := st.Host(ctx, h); !errors.Is(err, store.ErrNotFound) {
			continue
		}
		ids, err := st.HostIDsFold(ctx, h)
		if err != nil || len(ids) == 0 {
			continue
		}
		what := "it reaches only a host enrolled as " + h
		if tok.Role == store.RoleAgent {
			what = "its agent enrolls a second host, " + h + ", and the subdomain previews of both answer ambiguous_host"
		}
		fmt.Fprintf(sio.err, "warning: no host %q is enrolled, but %s is (host ids are case-sensitive): %s; if that is not what you meant, revoke this token (gateway token revoke %s) and make one with --host %s\n",
			h, strings.Join(ids, ", "), what, tok.ID, ids[0])
	}
}

// namedIDs says which ids the tokens named name have, for a revoke given
// a name: `token create --name` is what operators remember, and "no token
// with id" alone sent them looking.
// revokeNotFound is token revoke's answer to an id no token has. A
// token's secret given in its place is not repeated (the error lands in
// terminals, logs and CI output): its id is named instead, and nothing is
// revoked, since whoever holds a secret need not own the token.
func revokeNotFound(ctx context.Context, st *store.SQLite, toks []store.Token, id string) error {
	if strings.HasPrefix(id, store.TokenPrefix) {
		if t, err := st.LookupToken(ctx, id); err == nil || errors.Is(err, store.ErrExpired) {
			return fmt.Errorf("token revoke: that is a token's secret, not its id: nothing revoked; the token's id is %s (gateway token revoke %s)", t.ID, t.ID)
		}
		return errors.New("token revoke: that looks like a token's secret (" + store.TokenPrefix + "…), not an id, and no token has it: nothing revoked; gateway token list shows ids")
	}
	return fmt.Errorf("token revoke: no token with id %q; %s", id, namedIDs(toks, id))
}

func namedIDs(toks []store.Token, name string) string {
	var ids []string
	for _, t := range toks {
		if t.Name == name && t.Parent == "" {
			ids = append(ids, t.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "it takes a token's id, which gateway token list shows"
	case 1:
		return fmt.Sprintf("it takes an id, not a name: the token named %q has id %s", name, ids[0])
	}
	return fmt.Sprintf("it takes an id, not a name: the tokens named %q have ids %s", name, strings.Join(ids, ", "))
}

// parseOnlyEnv is parse with only the named flags taken from HOSTGATE_*.
func parseOnlyEnv(fs *flag.FlagSet, args []string, envFlags ...string) error {
	envUsage(fs, false, envFlags...)
	for _, n := range envFlags {
		f := fs.Lookup(n)
		if v, ok := os.LookupEnv(EnvName(n)); ok && f != nil {
			if err := f.Value.Set(v); err != nil {
				return fmt.Errorf("%s=%q: %w", EnvName(n), v, err)
			}
		}
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if f := fs.Lookup("state-dir"); f != nil && f.Value.String() == "" {
		return emptyStateDir(fs.Name(), f.DefValue)
	}
	return nil
}

// emptyStateDir refuses an empty --state-dir: an unset variable in a unit
// or compose file (HOSTGATE_STATE_DIR=${STATE}) had `gateway dev` keep its
// state, tokens and CA key in whatever directory it was started from, and
// the other commands fail with "mkdir : no such file or directory".
func emptyStateDir(cmd, def string) error {
	return fmt.Errorf("%s: --state-dir (HOSTGATE_STATE_DIR) is empty: want a directory, such as %s (the default, when neither is set)", cmd, def)
}
