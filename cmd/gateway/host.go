package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"

	"github.com/hostgate/hostgate/internal/store"
)

func init() { register("host", "host reset-key ID: forget a host's pinned key", runHost) }

func runHost(ctx context.Context, sio stdio, args []string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(sio.out, "usage: gateway host reset-key ID [--state-dir DIR]")
		return nil
	}
	if len(args) == 0 || args[0] != "reset-key" {
		fmt.Fprintln(sio.err, "usage: gateway host reset-key ID [--state-dir DIR]")
		return errUsage
	}
	var dir string
	fs := newFlags("host reset-key", sio)
	fs.StringVar(&dir, "state-dir", defaultStateDir(), "gateway state directory")
	if err := parseOnlyEnv(fs, args[1:], "state-dir"); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("host reset-key: want exactly one host id")
	}
	id := fs.Arg(0)
	st, _, err := openAdminState(ctx, dir, sio.err)
	if err != nil {
		return err
	}
	defer st.Close()
	by := "cli"
	if u, err := user.Current(); err == nil {
		by = "cli:" + u.Username
	}
	if err := st.ResetHostKey(ctx, id, by); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("host reset-key: no host %q", id)
		}
		return err
	}
	fmt.Fprintf(sio.out, "host %s: pinned key forgotten; the next agent to enroll for it pins its key\n", id)
	return nil
}
