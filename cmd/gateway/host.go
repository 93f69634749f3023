package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/hostgate/hostgate/internal/store"
)

func init() {
	register("host", "host reset-key ID: forget a host's pinned key | host remove ID: forget a machine host and revoke its agent tokens", runHost)
}

const hostUsage = "usage: gateway host reset-key ID [--state-dir DIR]\n       gateway host remove ID [--state-dir DIR]"

func runHost(ctx context.Context, sio stdio, args []string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(sio.out, hostUsage)
		return nil
	}
	if len(args) == 0 || (args[0] != "reset-key" && args[0] != "remove") {
		fmt.Fprintln(sio.err, hostUsage)
		return errUsage
	}
	sub := args[0]
	var dir string
	fs := newFlags("host "+sub, sio)
	fs.StringVar(&dir, "state-dir", defaultStateDir(), "gateway state directory")
	if err := parseOnlyEnv(fs, args[1:], "state-dir"); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("host %s: want exactly one host id", sub)
	}
	id := fs.Arg(0)
	st, _, err := openAdminState(ctx, dir, false, sio.err)
	if err != nil {
		return fmt.Errorf("host %s: %w", sub, err)
	}
	defer st.Close()
	by := "cli"
	if u, err := user.Current(); err == nil {
		by = "cli:" + u.Username
	}
	if sub == "remove" {
		return removeHost(ctx, sio, st, id)
	}
	// A sandbox's key is pinned by the gateway as it starts the sandbox's
	// agent, which never enrolls: a reset left every certificate for it
	// refused (409 host_key_reset) for as long as it ran.
	if h, err := st.Host(ctx, id); err == nil && h.Kind == store.KindDocker {
		return fmt.Errorf("host reset-key: %s is a sandbox's host, whose key the gateway pins itself when it starts the sandbox's agent (no agent enrolls it, so a reset would leave it refusing every SSH certificate): nothing reset; a sandbox gets a new key with a new execution (DELETE /v1/executions/%s, then provision or restore)", id, id)
	}
	if err := st.ResetHostKey(ctx, id, by); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("host reset-key: %s", noHost(ctx, st, id))
		}
		return err
	}
	fmt.Fprintf(sio.out, "host %s: pinned key forgotten; the next agent to enroll for it pins its key\n", id)
	return nil
}

// removeHost forgets a machine host: a retired machine's row stayed in
// the host list for good, and one whose id differs from another's only in
// case kept that one's subdomain previews answering ambiguous_host, with
// nothing to remove it by. The agent tokens that name it are revoked
// first, so its agent cannot enroll it again (a running gateway cuts its
// tunnel at the next token recheck); a client token that names it is
// left, and reaches it again should it come back.
func removeHost(ctx context.Context, sio stdio, st store.Store, id string) error {
	h, err := st.Host(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("host remove: %s", noHost(ctx, st, id))
	}
	if err != nil {
		return err
	}
	if h.Kind == store.KindDocker {
		return fmt.Errorf("host remove: %s is a sandbox's host: it goes with its execution (DELETE /v1/executions/%s)", id, id)
	}
	toks, err := st.Tokens(ctx)
	var unreadable *store.UnreadableTokensError
	if err != nil && !errors.As(err, &unreadable) {
		return err
	}
	var revoked, clients []string
	for _, t := range toks {
		if t.Parent != "" || !slices.Contains(t.Hosts, id) {
			continue
		}
		if t.Role != store.RoleAgent {
			clients = append(clients, t.Name)
			continue
		}
		if err := st.DeleteToken(ctx, t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("host remove: revoking agent token %s: %w; nothing removed", t.Name, err)
		}
		revoked = append(revoked, t.Name)
	}
	// Its public shares go too, with the host (DeleteHost, one
	// transaction): a host enrolled again under this id, by a new token,
	// is another machine. A running gateway ends them at their next use,
	// as shares of a host that is no longer theirs.
	// What is done when a later step fails: the tokens are revoked for
	// good, and a second run finds none left to revoke and goes on.
	partly := func(step string, err error) error {
		done := "no agent token revoked"
		if len(revoked) > 0 {
			done = "its agent token(s) " + strings.Join(revoked, ", ") + " are revoked already"
		}
		return fmt.Errorf("host remove: %s: %w; %s, but host %s stays: run gateway host remove %s again", step, err, done, id, id)
	}
	shares, err := st.Shares(ctx)
	if err != nil {
		return partly("listing its shares", err)
	}
	var ports []string
	for _, sh := range shares {
		if sh.HostID == id {
			ports = append(ports, strconv.Itoa(sh.Port))
		}
	}
	if err := st.DeleteHost(ctx, id, h.Kind); err != nil {
		return partly("removing it", err)
	}
	fmt.Fprintf(sio.out, "host %s: removed (its pinned key and info; the audit log keeps its entries)\n", id)
	if len(ports) > 0 {
		fmt.Fprintf(sio.out, "ended its public shares of port(s) %s\n", strings.Join(ports, ", "))
	}
	if len(revoked) > 0 {
		fmt.Fprintf(sio.out, "revoked its agent token(s): %s; a running gateway cuts a connected agent within --token-recheck (30 s): stop that agent, or it retries refused\n", strings.Join(revoked, ", "))
	} else {
		fmt.Fprintln(sio.out, "no agent token names it")
	}
	if len(clients) > 0 {
		fmt.Fprintf(sio.out, "client token(s) naming it, left as they are: %s\n", strings.Join(clients, ", "))
	}
	if unreadable != nil {
		fmt.Fprintf(sio.err, "warning: %v\n", unreadable)
	}
	return nil
}

// noHost says there is no host id, naming those that differ only in case.
func noHost(ctx context.Context, st store.Store, id string) string {
	if ids, err := st.HostIDsFold(ctx, id); err == nil && len(ids) > 0 {
		return fmt.Sprintf("no host %q (host ids are case-sensitive: %s)", id, strings.Join(ids, ", "))
	}
	return fmt.Sprintf("no host %q", id)
}
