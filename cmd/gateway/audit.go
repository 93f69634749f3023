package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
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
	st, err := openReadState(ctx, dir, sio.err)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), auditField(e.Kind), auditField(host), auditField(e.TokenName), auditField(e.RemoteAddr))
	}
	return tw.Flush()
}

// auditField is one field of an audit row as printed: as it is, or
// quoted when it holds what a terminal does not print as text (a control
// character, a tab, invalid UTF-8). A direct session's address is its
// agent's word, and a hostile agent's newlines, tabs and escapes, which
// older gateways recorded as sent, printed as rows of their own (another
// host, another token) and as commands to the admin's terminal.
func auditField(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 && utf8.ValidString(s) {
		return s
	}
	return strconv.Quote(s)
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
