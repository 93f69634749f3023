package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

func init() {
	register("token", "token create --role admin|client|agent [--host ID]… [--name N] [--ttl D]", runToken)
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

func runToken(ctx context.Context, sio stdio, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintln(sio.err, "usage: gateway token create --role admin|client|agent [--host ID] [--name N] [--ttl D] [--state-dir DIR]")
		return errUsage
	}
	var (
		role, name, dir string
		hosts           hostList
		ttl             time.Duration
	)
	fs := newFlags("token create", sio.err)
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
		return fmt.Errorf("token create: unexpected arguments %q", fs.Args())
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
	st, _, err := openState(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	secret, tok, err := st.CreateToken(ctx, spec)
	if err != nil {
		return err
	}
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

// parseOnlyEnv is parse with only the named flags taken from HOSTGATE_*.
func parseOnlyEnv(fs *flag.FlagSet, args []string, envFlags ...string) error {
	for _, n := range envFlags {
		f := fs.Lookup(n)
		if v, ok := os.LookupEnv(EnvName(n)); ok && f != nil {
			if err := f.Value.Set(v); err != nil {
				return fmt.Errorf("%s=%q: %w", EnvName(n), v, err)
			}
		}
	}
	return parseArgs(fs, args)
}
