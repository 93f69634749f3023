package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

func init() {
	register("audit", "audit [--limit N]: list the audit log's newest entries (SSH sessions, certificates, web terminals, shares, agent tunnels)", runAudit)
}

const auditUsage = "usage: gateway audit [--limit N] [--state-dir DIR]"

// runAudit prints the audit log, newest first. The gateway wrote it (the
// README's --audit-required makes every session wait on it) but nothing
// read it back: an operator had to open the database with sqlite3 and
// learn its schema.
func runAudit(ctx context.Context, sio stdio, args []string) error {
	var (
		dir   string
		limit int
	)
	fs := newFlags("audit", sio)
	fs.StringVar(&dir, "state-dir", defaultStateDir(), "gateway state directory")
	fs.IntVar(&limit, "limit", 100, "how many entries, newest first")
	if err := parseOnlyEnv(fs, args, "state-dir"); err != nil {
		return err
	}
	if fs.NArg() != 0 || limit < 1 {
		fmt.Fprintln(sio.err, auditUsage)
		return errUsage
	}
	if err := stateExists(dir); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, _, err := openAdminState(ctx, dir, sio.err)
	if err != nil {
		return err
	}
	defer st.Close()
	entries, err := st.Sessions(ctx, limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(sio.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tHOST\tTOKEN\tREMOTE")
	for _, e := range entries {
		host := e.HostID
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Kind, host, e.TokenName, e.RemoteAddr)
	}
	return tw.Flush()
}

// stateExists fails, naming the flag, when dir holds no gateway database:
// a command that only reads has nothing to read there, and creating new
// state would hide a mistyped --state-dir.
func stateExists(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, dbFile)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no gateway state in %s: is --state-dir (or HOSTGATE_STATE_DIR) the gateway's?", dir)
	}
	return nil
}
