package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/store"
)

func init() {
	register("backup", "backup --out DEST: copy the state dir while the gateway runs", runBackup)
}

const backupUsage = "usage: gateway backup --out DEST [--state-dir DIR]"

// backupDirs are the state dir's directories a gateway restored from a
// backup needs: the host keys of live sandboxes, checkpoints and the
// provision env of pooled executions. exec-output is a spool and left out.
var backupDirs = []string{"execution-keys", "checkpoints", "execution-env"}

func runBackup(ctx context.Context, sio stdio, args []string) error {
	var dir, out string
	fs := newFlags("backup", sio)
	fs.StringVar(&dir, "state-dir", defaultStateDir(), "gateway state directory")
	fs.StringVar(&out, "out", "", "the backup's directory: new, or empty (made 0700)")
	if err := parseOnlyEnv(fs, args, "state-dir"); err != nil {
		return err
	}
	if fs.NArg() != 0 || out == "" {
		fmt.Fprintln(sio.err, backupUsage)
		return errUsage
	}
	n, err := backup(ctx, dir, out)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("backup: interrupted, and %s left as it was: %w", out, err)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	keys := caKeyFile
	if _, err := os.Stat(filepath.Join(out, previewKeyFile)); err == nil {
		keys += ", " + previewKeyFile
	}
	fmt.Fprintf(sio.out, "backed up %s to %s (%s, %s and %d files of %s); %s\n",
		dir, out, dbFile, keys, n, strings.Join(backupDirs, ", "), restoreHint(dir, out))
	return nil
}

// restoreHint says how to restore out, a backup of dir. In dir's place
// (moved in whole: copied over the old files, the database would meet an
// old -wal file, which SQLite would apply to it) it is the same gateway
// in every way; at out's own path it is too, but for Docker, which knows
// a gateway's executions by an owner named after its state dir's path: a
// gateway restored there did not adopt the sandboxes that ran and
// recorded them as ended, while they ran on under the old owner.
func restoreHint(dir, out string) string {
	// Both absolute: the restore is run from wherever the operator is
	// then, often on another day.
	abs, absOut := absStateDir(dir), absStateDir(out)
	hint := fmt.Sprintf("to restore, stop the gateway and put the backup in the state dir's place (mv %s %s.old && cp -a %s %s), then start it", abs, abs, absOut, abs)
	ents, _ := os.ReadDir(filepath.Join(out, "execution-keys"))
	if len(ents) == 0 {
		return hint + " (or start it with --state-dir " + absOut + ")"
	}
	ran, left := fmt.Sprintf("the %d sandboxes that ran", len(ents)), "them running until their runtime ends"
	if len(ents) == 1 {
		ran, left = "the sandbox that ran", "it running until its runtime ends"
	}
	return fmt.Sprintf("%s: only there does it adopt %s (a gateway started with --state-dir %s is Docker executions owner %s, not %s, and leaves %s)",
		hint, ran, absOut, owner(out), owner(dir), left)
}

// backup copies the state dir's database (a consistent snapshot), CA key,
// previews' cookie key (when there is one) and backupDirs into out, which must not exist or be empty, as the state
// dir's owner's (keepOwner); on failure it leaves out as it found it. It reports how many files of backupDirs it
// copied.
func backup(ctx context.Context, dir, out string) (n int, err error) {
	if err := unfinishedBackup(dir); err != nil {
		return 0, err
	}
	db := filepath.Join(dir, dbFile)
	if _, err := os.Stat(db); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			// The state is there, another user's: say whose, and who runs.
			if aerr := checkStateAccess(dir); aerr != nil {
				return 0, aerr
			}
		}
		return 0, fmt.Errorf("no gateway state in %s (%v): is --state-dir (or HOSTGATE_STATE_DIR) the gateway's?", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, caKeyFile)); err != nil {
		return 0, fmt.Errorf("%s has no %s (%v): a gateway restored without it makes a new CA, which every enrolled agent refuses", dir, caKeyFile, err)
	}
	made := false
	switch ents, err := os.ReadDir(out); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(out, 0o700); err != nil {
			return 0, err
		}
		made = true
	case err != nil:
		return 0, err
	case len(ents) > 0 && unfinishedBackup(out) != nil:
		return 0, fmt.Errorf("%s holds a backup that did not finish (%s; its ssh session dropped, say): remove it (rm -r %s) and run this again, or give --out a new directory", out, backupIncompleteFile, out)
	case len(ents) > 0:
		return 0, fmt.Errorf("%s exists and is not empty: give --out a new directory (or remove what is in it)", out)
	default:
		if err := os.Chmod(out, 0o700); err != nil {
			return 0, err
		}
	}
	defer func() {
		if err == nil {
			return
		}
		if made {
			_ = os.RemoveAll(out)
			return
		}
		ents, _ := os.ReadDir(out)
		for _, e := range ents {
			_ = os.RemoveAll(filepath.Join(out, e.Name()))
		}
	}()
	if err := backupFits(dir, out); err != nil {
		return 0, err
	}
	// Made durable before anything else, and gone only once all the rest
	// is: a backup that is killed or loses its power partway leaves it.
	marker := filepath.Join(out, backupIncompleteFile)
	if err := os.WriteFile(marker, []byte(backupIncompleteText), 0o600); err != nil {
		return 0, err
	}
	if err := durable.SyncDir(out); err != nil {
		return 0, err
	}
	if err := store.Backup(ctx, db, filepath.Join(out, dbFile)); err != nil {
		return 0, err
	}
	if err := syncFile(filepath.Join(out, dbFile)); err != nil {
		return 0, err
	}
	if err := copyFile(ctx, filepath.Join(dir, caKeyFile), filepath.Join(out, caKeyFile)); err != nil {
		return 0, err
	}
	// The previews' cookie key: a gateway restored without it makes a new
	// one, and every open preview is logged out (a Vite tab's hot reload
	// for good). A state dir only older gateways served has none.
	if err := copyFile(ctx, filepath.Join(dir, previewKeyFile), filepath.Join(out, previewKeyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	for _, d := range backupDirs {
		c, err := copyTree(ctx, filepath.Join(dir, d), filepath.Join(out, d))
		if err != nil {
			return 0, err
		}
		n += c
	}
	dropped, err := dropLoneManifests(filepath.Join(out, "checkpoints"))
	if err != nil {
		return 0, err
	}
	n -= dropped
	if err := keepOwner(dir, out); err != nil {
		return 0, err
	}
	// Every file was synced as it was written; their names are on disk
	// once their directories are too, and only then may the marker go.
	if err := syncDirs(out); err != nil {
		return 0, err
	}
	if err := os.Remove(marker); err != nil {
		return 0, err
	}
	return n, durable.SyncDir(out)
}

// backupIncompleteFile is in a backup's directory while the backup is
// written. A backup killed partway (an ssh session's SIGHUP, which the
// command does not catch, SIGKILL, the OOM killer, a power loss) held the
// database and CA key but not every checkpoint or sandbox key, and the
// file being copied cut: a gateway started on it, or on a copy of it in
// the state dir's place, took it for the whole state. openState and
// backup refuse a directory that holds it (unfinishedBackup).
const backupIncompleteFile = "backup-incomplete"

const backupIncompleteText = "A gateway backup was being written into this directory and did not finish: it may lack files or hold cut ones, and a gateway refuses to start on it. Take the backup again.\n"

// unfinishedBackup fails, saying what to do, when dir is a backup that
// did not finish.
func unfinishedBackup(dir string) error {
	if _, err := os.Lstat(filepath.Join(dir, backupIncompleteFile)); err != nil {
		return nil
	}
	return fmt.Errorf("%s is a gateway backup that did not finish (it holds %s: the backup was stopped, or its machine went down, while it copied), so files may be missing or cut: take the backup again (gateway backup --out NEW) or restore a whole one (should this be all there is, delete %s to use what it holds, what was not yet copied missing)",
		dir, backupIncompleteFile, filepath.Join(dir, backupIncompleteFile))
}

// syncDirs syncs dir and every directory under it.
func syncDirs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return durable.SyncDir(p)
	})
}

// backupFits fails, saying both sizes, when the filesystem out is to be
// written to has less space free than dir's state takes: the backup
// copied until that disk was full, and where out shares the state dir's
// disk (a backups directory beside it) the running gateway's own writes
// failed meanwhile. The database's copy is taken at its file's size, its
// -wal's included, which VACUUM INTO does not pass. A filesystem that
// cannot be measured is not refused.
func backupFits(dir, out string) error {
	free, err := backupFree(out)
	if err != nil {
		return nil
	}
	var need uint64
	for _, f := range []string{dbFile, dbFile + "-wal", caKeyFile, previewKeyFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			need += uint64(fi.Size())
		}
	}
	for _, d := range backupDirs {
		src := filepath.Join(dir, d)
		if real, err := filepath.EvalSymlinks(src); err == nil {
			src = real
		}
		_ = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || strings.HasSuffix(p, ".partial") {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				need += uint64(fi.Size())
			}
			return nil
		})
	}
	if need <= free {
		return nil
	}
	return fmt.Errorf("%s's disk has %s free, and the backup of %s needs about %s: free space there, or give --out a directory on another disk", out, iecBytes(free), dir, iecBytes(need))
}

// iecBytes is n in the largest binary unit it has a whole one of, to a
// tenth (512 KiB, 1.5 GiB).
func iecBytes(n uint64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift {
			v := strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/float64(uint64(1)<<u.shift)), ".0")
			return v + " " + u.name
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// copyTree copies src's directories (0700) and regular files (0600) to
// dst, all but a checkpoint's partial files; a src that does not exist, or
// a file that goes while it is copied (a sandbox that ended), is skipped.
// It stops when ctx ends (copyFile). A src that is a symbolic link (the
// checkpoints kept on a larger disk) is followed, as the gateway follows
// it; links under it are not, as the gateway makes none.
func copyTree(ctx context.Context, src, dst string) (n int, err error) {
	if fi, err := os.Lstat(src); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if real, err := filepath.EvalSymlinks(src); err == nil {
			src = real
		}
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o700)
		case !d.Type().IsRegular() || strings.HasSuffix(p, ".partial"):
			return nil
		}
		if testHookBackupCopy != nil {
			testHookBackupCopy(p)
		}
		if err := copyFile(ctx, p, to); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// dropLoneManifests removes from the backup's checkpoints dir each
// checkpoint's manifest (ID.json) copied without its tar (ID.tar): one
// deleted while the walk went (the manifest goes first, then the tar)
// was in the backup by its manifest alone, a checkpoint the restored
// gateway lists and fails to restore. A tar without its manifest (one
// committed meanwhile: the tar is renamed into place first) is a leftover
// the checkpoint store sweeps. It reports how many it removed.
func dropLoneManifests(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, id+".tar")); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// testHookBackupCopy, when set (tests), is called with each file's path
// before copyTree copies it.
var testHookBackupCopy func(path string)

// copyFile copies src to the new file dst (0600), synced. It stops when
// ctx ends: the command catches Ctrl-C and SIGTERM into ctx, so a copy
// that did not look at it went on through every checkpoint (GiB,
// minutes) while the operator waited for it to stop.
func copyFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	outf, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// In chunks, each an io.CopyN that keeps the kernel's copy
	// (copy_file_range: a reflink where the file system has them) a
	// reader of our own would lose.
	for err == nil {
		if err = ctx.Err(); err == nil {
			_, err = io.CopyN(outf, in, copyChunk)
		}
	}
	if errors.Is(err, io.EOF) {
		err = outf.Sync()
	}
	return errors.Join(err, outf.Close())
}

// copyChunk is how much copyFile copies between looks at its ctx: a
// fraction of a second at a disk's speed.
const copyChunk = 16 << 20

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// owner names this gateway's containers after its state directory, so
// that gateways sharing an engine never adopt (or reap) each other's
// executions, and a restarted gateway finds its own.
func owner(stateDir string) string {
	sum := sha256.Sum256([]byte(absStateDir(stateDir)))
	return "hostgate-" + hex.EncodeToString(sum[:6])
}

// absStateDir is stateDir made absolute, as owner hashes it.
func absStateDir(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return stateDir
	}
	return abs
}
