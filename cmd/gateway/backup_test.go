package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/store"
)

// authorizedHostKey is a new host key in authorized_keys form.
func authorizedHostKey(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

// A backup taken while another goroutine writes tokens is a state dir a
// gateway opens as the same gateway: the same CA, pinned host keys and
// tokens (those made before it, and of those made during it a prefix, as
// one snapshot has), the previews' cookie key (a cookie minted before it is
// taken after), the state's files, and none of its spool, lock or
// partial files; the directory is 0700 and its files 0600.
func TestBackupWhileWriting(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, ca, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hostKey := authorizedHostKey(t)
	if _, err := st.Enroll(ctx, store.Enrollment{HostID: "build-01", Kind: "machine", HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	secret, _, err := st.CreateToken(ctx, store.TokenSpec{Name: "admin", Role: store.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"execution-keys/e1/host_key":     "sandbox key",
		"checkpoints/c1.tar":             "checkpoint",
		"execution-env/e2.json":          "{}",
		"checkpoints/c2.tar.123.partial": "half",
		"exec-output/spool":              "output",
		lockFile:                         "",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A preview's cookie, which the restored gateway must take: without
	// the key it makes a new one, and open previews are logged out.
	cookie, _ := previewSigner(dir, slog.New(slog.DiscardHandler)).Cookie("tok1", "h1", 3000, time.Hour)
	if err := os.Chmod(filepath.Join(dir, previewKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}

	// The writer makes tokens named w0, w1, … until the backup is done.
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		written int
		werr    error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := st.CreateToken(ctx, store.TokenSpec{Name: fmt.Sprintf("w%d", written), Role: store.RoleClient}); err != nil {
				werr = err
				return
			}
			written++
		}
	}()
	out := filepath.Join(t.TempDir(), "backup")
	msg, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatalf("a write during the backup: %v", werr)
	}
	if !strings.Contains(msg, "backed up "+dir+" to "+out) || !strings.Contains(msg, caKeyFile+", "+previewKeyFile+" and 3 files") {
		t.Errorf("backup said %q", msg)
	}

	var got []string
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700 | fs.ModeDir
		}
		if fi.Mode() != want {
			t.Errorf("%s is %v, want %v", p, fi.Mode(), want)
		}
		if rel, _ := filepath.Rel(out, p); !d.IsDir() {
			got = append(got, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{caKeyFile, "checkpoints/c1.tar", "execution-env/e2.json", "execution-keys/e1/host_key", dbFile, previewKeyFile}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("backup holds %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(out, "execution-keys/e1/host_key")); err != nil || string(b) != "sandbox key" {
		t.Errorf("execution key: %q, %v", b, err)
	}

	st2, ca2, err := openState(ctx, out, func(f store.TightenedFile) { t.Errorf("restore tightened %s", f.Path) })
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if ca2.AuthorizedKey() != ca.AuthorizedKey() {
		t.Error("the restored gateway has another CA")
	}
	if who, err := previewSigner(out, slog.New(slog.DiscardHandler)).CheckCookie(cookie, "h1", 3000); err != nil || who != "tok1" {
		t.Errorf("a preview's cookie from before the backup, to the restored gateway: %q, %v; want tok1", who, err)
	}
	if _, err := st2.LookupToken(ctx, secret); err != nil {
		t.Errorf("the admin token in the backup: %v", err)
	}
	if h, err := st2.Host(ctx, "build-01"); err != nil || h.HostKey != hostKey {
		t.Errorf("the pinned key in the backup: %q, %v", h.HostKey, err)
	}
	toks, err := st2.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tk := range toks {
		if strings.HasPrefix(tk.Name, "w") {
			n++
		}
	}
	for i := range n {
		if !slices.ContainsFunc(toks, func(tk store.Token) bool { return tk.Name == fmt.Sprintf("w%d", i) }) {
			t.Errorf("the backup has %d writer tokens but not w%d: not one snapshot", n, i)
		}
	}
	t.Logf("%d tokens written during the backup, %d of them in it", written, n)
}

// backup refuses an --out that holds anything, leaving it be, and a
// state dir that has no database or CA key; an empty --out is used.
func TestBackupRefuses(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", filepath.Join(t.TempDir(), "b")); err == nil || !strings.Contains(err.Error(), "no gateway state in "+dir) {
		t.Errorf("a state dir with no database: %v", err)
	}
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = cli(t, ctx, "backup", "--state-dir", dir, "--out", full)
	if err == nil || !strings.Contains(err.Error(), full+" exists and is not empty: give --out a new directory") {
		t.Errorf("a full --out: %v", err)
	}
	if ents, _ := os.ReadDir(full); len(ents) != 1 {
		t.Errorf("a refused --out was changed: %v", ents)
	}

	empty := t.TempDir()
	if err := os.Chmod(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", empty); err != nil {
		t.Fatalf("an empty --out: %v", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("an empty --out is %v, %v; want 0700", fi.Mode(), err)
	}

	if err := os.Remove(filepath.Join(dir, caKeyFile)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out); err == nil || !strings.Contains(err.Error(), "has no "+caKeyFile) {
		t.Errorf("a state dir with no CA key: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed backup left %s: %v", out, err)
	}
	if _, err := cli(t, ctx, "backup", "--state-dir", dir); !errors.Is(err, errUsage) {
		t.Errorf("no --out: %v", err)
	}
}

// A checkpoint deleted while the backup copies the checkpoints is in the
// backup whole or not at all: its manifest (ID.json) copied and its tar
// gone by the time the walk came to it left a checkpoint the restored
// gateway lists and fails to restore (open checkpoint tar: no such file).
func TestBackupCheckpointDeletedMeanwhile(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "checkpoints")
	if err := os.Mkdir(cp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ckpt-a", "ckpt-b"} {
		for _, ext := range []string{".json", ".tar"} {
			if err := os.WriteFile(filepath.Join(cp, id+ext), []byte(id+ext), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// ckpt-a is deleted once the first of its files has been copied, as
	// the checkpoint store deletes: the manifest, then the tar.
	deleted, copied := false, 0
	testHookBackupCopy = func(p string) {
		if filepath.Dir(p) != cp || !strings.HasPrefix(filepath.Base(p), "ckpt-a.") {
			return
		}
		if copied++; copied == 2 && !deleted {
			deleted = true
			_ = os.Remove(filepath.Join(cp, "ckpt-a.json"))
			_ = os.Remove(filepath.Join(cp, "ckpt-a.tar"))
		}
	}
	t.Cleanup(func() { testHookBackupCopy = nil })
	out := filepath.Join(t.TempDir(), "backup")
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out); err != nil {
		t.Fatal(err)
	}
	if !deleted {
		t.Fatal("the test's delete never ran")
	}
	for _, id := range []string{"ckpt-a", "ckpt-b"} {
		_, jerr := os.Stat(filepath.Join(out, "checkpoints", id+".json"))
		_, terr := os.Stat(filepath.Join(out, "checkpoints", id+".tar"))
		if jerr == nil && terr != nil {
			t.Errorf("the backup has %s's manifest without its tar (%v): a checkpoint the restored gateway lists and cannot restore", id, terr)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "checkpoints", "ckpt-b.tar")); err != nil {
		t.Errorf("ckpt-b, untouched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "checkpoints", "ckpt-b.json")); err != nil {
		t.Errorf("ckpt-b, untouched: %v", err)
	}
}

// A backup interrupted (Ctrl-C, SIGTERM: its ctx ends) while it copies
// the state's files stops there and leaves no --out: it ignored the
// signal, which the command catches, and copied every checkpoint (many
// GiB, minutes) before it exited, as if it had not been asked to stop.
func TestBackupInterrupted(t *testing.T) {
	dir := t.TempDir()
	st, _, err := openState(testCtx(t), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "checkpoints")
	if err := os.Mkdir(cp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ckpt-a", "ckpt-b"} {
		for _, ext := range []string{".json", ".tar"} {
			if err := os.WriteFile(filepath.Join(cp, id+ext), []byte(id+ext), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	copied := 0
	testHookBackupCopy = func(string) {
		if copied++; copied == 1 {
			cancel() // the operator's Ctrl-C, once the first file is under way
		}
	}
	t.Cleanup(func() { testHookBackupCopy = nil })
	out := filepath.Join(t.TempDir(), "backup")
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out); !errors.Is(err, context.Canceled) {
		t.Errorf("an interrupted backup: %v, want context.Canceled", err)
	}
	if copied > 1 {
		t.Errorf("the backup went on to copy %d files after it was interrupted", copied-1)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an interrupted backup left %s: %v", out, err)
	}
}

// A backup killed partway (its ssh session dropped: SIGHUP, which the
// command does not catch; SIGKILL, the OOM killer, a power loss) leaves
// --out as it was then, which a gateway refuses to start on, naming the
// fix; the finished backup has no trace of that. The cut one held the
// database and CA key, and a gateway (or gateway token list) took it as
// the state dir it was, every checkpoint and sandbox key not yet copied
// missing and the one being copied cut.
func TestBackupKilledPartwayRefused(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateToken(ctx, store.TokenSpec{Name: "admin", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "checkpoints")
	if err := os.Mkdir(cp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ckpt-a.json", "ckpt-a.tar"} {
		if err := os.WriteFile(filepath.Join(cp, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "backup")
	cut := filepath.Join(t.TempDir(), "cut")
	// What a kill as the first checkpoint file is copied leaves, as an
	// operator would then copy it into the state dir's place.
	testHookBackupCopy = func(string) {
		if _, err := os.Stat(cut); err == nil {
			return
		}
		if b, err := exec.Command("cp", "-a", out, cut).CombinedOutput(); err != nil {
			t.Errorf("cp -a: %v: %s", err, b)
		}
	}
	t.Cleanup(func() { testHookBackupCopy = nil })
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cut); err != nil {
		t.Fatalf("the test's copy never ran: %v", err)
	}
	_, err = cli(t, ctx, "token", "list", "--state-dir", cut)
	if err == nil || !strings.Contains(err.Error(), "did not finish") || !strings.Contains(err.Error(), "gateway backup") {
		t.Errorf("token list on a backup cut partway: %v; want a refusal that says it did not finish and to take it again", err)
	}
	if _, err := cli(t, ctx, "backup", "--state-dir", cut, "--out", filepath.Join(t.TempDir(), "b2")); err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("a backup of a backup cut partway: %v; want a refusal", err)
	}
	if out, err := cli(t, ctx, "token", "list", "--state-dir", out); err != nil || !strings.Contains(out, "admin") {
		t.Errorf("token list on the finished backup: %q, %v", out, err)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !slices.Contains([]string{dbFile, caKeyFile, "checkpoints"}, e.Name()) && !strings.HasPrefix(e.Name(), dbFile+"-") {
			t.Errorf("the finished backup holds %s", e.Name())
		}
	}
}

// A state dir whose database is an empty file beside its CA key (a
// restore's cp -a cut by a full disk, which left gateway.db 0 bytes) is
// refused, naming the file and the fix, and left as it is: SQLite takes an
// empty file for a new database, so the gateway and every command started
// on new state in silence, every token, pinned host key and audit entry
// gone and every agent's token refused.
func TestEmptyDatabaseRefused(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateToken(ctx, store.TokenSpec{Name: "admin", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, dbFile)
	if err := os.Truncate(db, 0); err != nil {
		t.Fatal(err)
	}
	_, err = cli(t, ctx, "token", "list", "--state-dir", dir)
	if err == nil || !strings.Contains(err.Error(), db+" is empty") || !strings.Contains(err.Error(), "backup") {
		t.Errorf("token list on an empty database: %v; want a refusal naming it and a backup", err)
	}
	if _, _, err := openState(ctx, dir, nil); err == nil {
		t.Error("openState (serve's) took an empty database")
	}
	if fi, err := os.Stat(db); err != nil || fi.Size() != 0 {
		t.Errorf("the empty database was written: %v, %v", fi.Size(), err)
	}
}

// The restore command a backup prints names the backup by its absolute
// path, as it names the state dir: given --out relative, it printed
// "cp -a b /abs/state", which failed (or copied another b) when run, as
// a restore is, from another directory, often on another day.
func TestBackupRestoreHintAbsolute(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	t.Chdir(wd)
	msg, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", "b")
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(wd, "b")
	if !strings.Contains(msg, "cp -a "+abs+" "+dir) || !strings.Contains(msg, "--state-dir "+abs) {
		t.Errorf("backup said %q; want its restore to name %s", msg, abs)
	}
}

// A backup run again into the --out of one that did not finish (killed
// with its ssh session) is told that is what is there and how to clear
// it, not only that the directory is not empty, and leaves it be.
func TestBackupAgainIntoUnfinished(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, name := range []string{backupIncompleteFile, dbFile} {
		if err := os.WriteFile(filepath.Join(out, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cli(t, ctx, "backup", "--state-dir", dir, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "did not finish") || !strings.Contains(err.Error(), "rm -r "+out) {
		t.Errorf("a backup into an unfinished one: %v; want it named, and rm -r %s", err, out)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 2 {
		t.Errorf("the unfinished backup was changed: %v", ents)
	}
}

// A state dir whose checkpoints directory is a symbolic link (to a larger
// disk: the gateway keeps them there as well as in the state dir) is
// backed up with those checkpoints, copied as files of the backup's own
// checkpoints directory: the walk did not follow the link, so the backup
// held none and said "0 files", and the restored gateway had none.
func TestBackupFollowsLinkedDir(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	for _, name := range []string{"ckpt-a.json", "ckpt-a.tar"} {
		if err := os.WriteFile(filepath.Join(elsewhere, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "checkpoints")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "backup")
	msg, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, " and 2 files of ") {
		t.Errorf("backup said %q; want 2 files", msg)
	}
	if fi, err := os.Lstat(filepath.Join(out, "checkpoints")); err != nil || !fi.IsDir() {
		t.Fatalf("the backup's checkpoints: %v, %v; want a directory", fi, err)
	}
	for _, name := range []string{"ckpt-a.json", "ckpt-a.tar"} {
		if b, err := os.ReadFile(filepath.Join(out, "checkpoints", name)); err != nil || string(b) != name {
			t.Errorf("the backup's %s: %q, %v", name, b, err)
		}
	}
}

// A backup whose --out's filesystem has less space free than the state to
// copy is refused before it writes anything, saying both sizes: it copied
// until the disk was full, and where --out shares the state dir's disk
// (a backups directory beside it) the running gateway's own writes failed
// meanwhile (store_unavailable, audit_unavailable) until it gave up.
func TestBackupRefusesTooLittleSpace(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openState(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "checkpoints")
	if err := os.Mkdir(cp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cp, "ckpt-a.tar"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cp, "ckpt-a.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	free := uint64(512 << 10)
	var asked []string
	old := backupFree
	backupFree = func(d string) (uint64, error) { asked = append(asked, d); return free, nil }
	t.Cleanup(func() { backupFree = old })
	out := filepath.Join(t.TempDir(), "backup")
	_, err = cli(t, ctx, "backup", "--state-dir", dir, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "512 KiB free") || !strings.Contains(err.Error(), "needs") {
		t.Errorf("a backup into too little space: %v; want a refusal naming what is free and what it needs", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused backup made %s: %v", out, err)
	}
	if !slices.Contains(asked, out) {
		t.Errorf("free space asked of %q, want %s", asked, out)
	}
	free = 1 << 30
	if _, err := cli(t, ctx, "backup", "--state-dir", dir, "--out", out); err != nil {
		t.Errorf("a backup that fits: %v", err)
	}
}
