package dockerhost

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hostgate/hostgate/internal/durable"
)

// ManifestVersion is the only manifest version this package reads and writes.
const ManifestVersion = 1

// maxManifestBytes bounds a manifest read back from a store.
const maxManifestBytes = 64 << 10

var (
	checkpointIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
	sha256RE       = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Manifest describes one checkpoint: the workspace tar's size and sha256
// and the provision request that made the execution, without environment
// values. It holds no process, memory, network or credential state.
type Manifest struct {
	Version      int              `json:"version"`
	CheckpointID string           `json:"checkpointId"`
	ExecutionID  string           `json:"executionId"`
	CreatedAt    time.Time        `json:"createdAt"`
	Reason       string           `json:"reason,omitempty"`
	SizeBytes    int64            `json:"sizeBytes"`
	SHA256       string           `json:"sha256"`
	Request      ProvisionRequest `json:"request"`
}

// Validate checks the manifest's schema. It is run on write and on read.
func (m *Manifest) Validate() error {
	switch {
	case m.Version != ManifestVersion:
		return fmt.Errorf("dockerhost: manifest version %d not supported (want %d)", m.Version, ManifestVersion)
	case !checkpointIDRE.MatchString(m.CheckpointID):
		return errors.New("dockerhost: manifest checkpointId malformed")
	case !executionIDRE.MatchString(m.ExecutionID):
		return errors.New("dockerhost: manifest executionId malformed")
	case m.CreatedAt.IsZero():
		return errors.New("dockerhost: manifest createdAt missing")
	case len(m.Reason) > 1024:
		return errors.New("dockerhost: manifest reason longer than 1024 bytes")
	case !utf8.ValidString(m.Reason):
		// JSON would write each invalid byte as U+FFFD (three bytes): the
		// manifest would read back otherwise, and perhaps over 1024.
		return errors.New("dockerhost: manifest reason is not UTF-8")
	case m.SizeBytes < 0:
		return errors.New("dockerhost: manifest sizeBytes negative")
	case !sha256RE.MatchString(m.SHA256):
		return errors.New("dockerhost: manifest sha256 malformed")
	case m.Request.Image == "":
		return errors.New("dockerhost: manifest request.image missing")
	}
	r := m.Request.Resources
	if r.CPUs <= 0 || r.MemoryBytes <= 0 || r.DiskBytes <= 0 || r.Pids <= 0 || r.RuntimeMs <= 0 || r.MaxOutputBytes <= 0 {
		return errors.New("dockerhost: manifest request.resources incomplete")
	}
	if m.SizeBytes > maxTarBytes(r.DiskBytes) {
		return errors.New("dockerhost: manifest sizeBytes exceeds the disk limit")
	}
	for k, v := range m.Request.Env {
		if v != "" {
			return fmt.Errorf("dockerhost: manifest request.env.%s holds a value", k)
		}
	}
	return nil
}

// ParseManifest decodes and validates a manifest strictly: a known version,
// no unknown fields, no trailing data.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, errors.New("dockerhost: manifest too large")
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("dockerhost: decode manifest: %w", err)
	}
	if v.Version != ManifestVersion {
		return nil, fmt.Errorf("dockerhost: manifest version %d not supported (want %d)", v.Version, ManifestVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("dockerhost: decode manifest: %w", err)
	}
	if dec.More() {
		return nil, errors.New("dockerhost: decode manifest: trailing data")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// maxTarBytes is the largest workspace tar a disk limit admits: the files
// themselves plus tar headers, padding and the end-of-archive blocks.
func maxTarBytes(diskBytes int64) int64 { return diskBytes + diskBytes/8 + 64<<10 }

// ValidCheckpointID reports whether id has the form of a checkpoint id
// (32 lowercase hex digits); no checkpoint has any other.
func ValidCheckpointID(id string) bool { return checkpointIDRE.MatchString(id) }

// newCheckpointID returns 128 random bits in hex: ids are unguessable.
func newCheckpointID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand doc)
	return hex.EncodeToString(b[:])
}

// ErrCheckpointNotFound is returned by a CheckpointStore for an unknown id.
var ErrCheckpointNotFound = fmt.Errorf("dockerhost: checkpoint not found: %w", fs.ErrNotExist)

// CheckpointStore keeps checkpoints: a workspace tar and its manifest. The
// local directory is the default; object storage is the other intended
// implementation (a local checkpoint id is not a distributed source of
// truth).
type CheckpointStore interface {
	// Create starts a checkpoint; nothing is visible until Commit.
	Create(ctx context.Context, checkpointID string) (CheckpointWriter, error)
	// Open returns the validated manifest and the tar. The caller verifies
	// the tar against the manifest while reading it.
	Open(ctx context.Context, checkpointID string) (*Manifest, io.ReadCloser, error)
	// Delete removes a checkpoint for good before it returns: no list,
	// Open or later store over the same storage finds it. A tar opened
	// before keeps reading to its end (a restore in progress gets all of
	// it): a local file unlinked stays readable through its descriptor; an
	// object store must keep the object's version its readers read.
	Delete(ctx context.Context, checkpointID string) error
	// List calls fn with the validated manifest of every committed
	// checkpoint, in no particular order, until fn returns false. It
	// skips (and logs) what is not a readable checkpoint: a checkpoint
	// being written, a damaged manifest. Memory stays bounded whatever
	// the store holds: fn sees each manifest as it is read.
	List(ctx context.Context, fn func(*Manifest) bool) error
}

// CheckpointWriter receives a checkpoint's tar. Exactly one of Commit or
// Abort must be called.
type CheckpointWriter interface {
	io.Writer
	// Commit validates m and makes the checkpoint visible.
	Commit(m *Manifest) error
	Abort() error
}

// LocalStore is a CheckpointStore in a local directory: ID.tar next to
// ID.json, each written to a temporary name and renamed into place, the
// manifest last.
type LocalStore struct {
	Dir string
	// Logger gets what List skips; nil discards.
	Logger *slog.Logger

	mu      sync.Mutex
	writing map[string]int // ids this store is writing: never leftovers
}

var _ CheckpointStore = (*LocalStore)(nil)

// NewLocalStore creates dir (mode 0700) if needed, and removes what a
// killed run left there long enough ago (sweepLeftovers).
func NewLocalStore(dir string) (*LocalStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dockerhost: checkpoint dir: %w", err)
	}
	s := &LocalStore{Dir: dir}
	s.sweepLeftovers(time.Now())
	return s, nil
}

// partialMaxIdle is how long a checkpoint being written may go without a
// write before a new LocalStore takes it for the leftover of a killed run.
const partialMaxIdle = 10 * time.Minute

// sweepLeftovers removes the *.partial files, and the ID.tar files
// without their ID.json, last written partialMaxIdle or more before now,
// unless this store is writing their checkpoint. A gateway killed during
// a checkpoint left the partial files (14 MB in one audit run); one killed
// between a commit's two renames, or between a delete's two removes, left
// a tar no list shows and no retention counts: nothing else would ever
// remove them. It returns when the youngest leftover it kept will be old
// enough (zero: none kept), for the host's sweeper to come back then: one
// younger than partialMaxIdle when the gateway started would otherwise
// stay until the next start.
func (s *LocalStore) sweepLeftovers(now time.Time) (next time.Time) {
	// Held throughout: a commit between this read and a remove would
	// otherwise have its tar taken for a leftover.
	s.mu.Lock()
	defer s.mu.Unlock()
	// The directory read and its names matched, not filepath.Glob of
	// its path: a path holding a pattern's characters ([, *, ?: a state
	// dir "gw[1]") made Glob sweep other directories the pattern
	// matched ("gw1"), and none of this one.
	ents, _ := os.ReadDir(s.Dir)
	var names []string
	for _, de := range ents {
		n := de.Name()
		if strings.HasSuffix(n, ".partial") {
			names = append(names, filepath.Join(s.Dir, n))
			continue
		}
		id, isTar := strings.CutSuffix(n, ".tar")
		if !isTar || !checkpointIDRE.MatchString(id) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(s.Dir, id+".json")); errors.Is(err, fs.ErrNotExist) {
			names = append(names, filepath.Join(s.Dir, n))
		}
	}
	for _, n := range names {
		// ID.tar, ID.tar.*.partial, ID.json.*.partial
		id, _, _ := strings.Cut(filepath.Base(n), ".")
		if s.writing[id] > 0 {
			continue
		}
		fi, err := os.Lstat(n)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if old := fi.ModTime().Add(partialMaxIdle); old.After(now) {
			if next.IsZero() || old.Before(next) {
				next = old
			}
			continue
		}
		_ = os.Remove(n)
	}
	return next
}

// startWriting and doneWriting mark id as being written, so that
// sweepLeftovers leaves its files alone however long it takes.
func (s *LocalStore) startWriting(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing == nil {
		s.writing = map[string]int{}
	}
	s.writing[id]++
}

func (s *LocalStore) doneWriting(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing[id]--; s.writing[id] <= 0 {
		delete(s.writing, id)
	}
}

func (s *LocalStore) Create(_ context.Context, id string) (CheckpointWriter, error) {
	if !checkpointIDRE.MatchString(id) {
		return nil, errors.New("dockerhost: malformed checkpoint id")
	}
	s.startWriting(id)
	f, err := os.CreateTemp(s.Dir, id+".tar.*.partial")
	if err != nil {
		s.doneWriting(id)
		return nil, fmt.Errorf("dockerhost: create checkpoint: %w", err)
	}
	return &localWriter{s: s, id: id, f: f, bw: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (s *LocalStore) Open(_ context.Context, id string) (*Manifest, io.ReadCloser, error) {
	if !checkpointIDRE.MatchString(id) {
		return nil, nil, ErrCheckpointNotFound
	}
	m, err := s.readManifest(id)
	if err != nil {
		return nil, nil, err
	}
	f, err := openRegular(filepath.Join(s.Dir, id+".tar"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, merr := os.Lstat(filepath.Join(s.Dir, id+".json")); errors.Is(merr, fs.ErrNotExist) {
			return nil, nil, ErrCheckpointNotFound // deleted since its manifest was read
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dockerhost: open checkpoint tar: %w", err)
	}
	return m, f, nil
}

// readManifest reads and validates id's manifest, never following a
// symbolic link (openRegular).
func (s *LocalStore) readManifest(id string) (*Manifest, error) {
	mf, err := openRegular(filepath.Join(s.Dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrCheckpointNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("dockerhost: open manifest: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(mf, maxManifestBytes+1))
	_ = mf.Close()
	if err != nil {
		return nil, fmt.Errorf("dockerhost: read manifest: %w", err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, err
	}
	if m.CheckpointID != id {
		return nil, errors.New("dockerhost: manifest checkpointId does not match its name")
	}
	return m, nil
}

// listBatch is how many directory entries List reads at a time.
const listBatch = 256

// List reads the directory listBatch names at a time and each manifest
// through openRegular (no symbolic link is followed). Files being written
// (*.partial) are skipped and logged at debug level; a manifest that is
// not a regular file or does not parse, and names that are no
// checkpoint's, are skipped and logged as warnings.
func (s *LocalStore) List(ctx context.Context, fn func(*Manifest) bool) error {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d, err := os.Open(s.Dir)
	if err != nil {
		return fmt.Errorf("dockerhost: list checkpoints: %w", err)
	}
	defer func() { _ = d.Close() }()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, rerr := d.ReadDir(listBatch)
		for _, de := range ents {
			name := de.Name()
			if strings.HasSuffix(name, ".partial") {
				log.Debug("checkpoint list: skipped a file being written (or left by a killed run)", "file", name)
				continue
			}
			if id, isTar := strings.CutSuffix(name, ".tar"); isTar && checkpointIDRE.MatchString(id) {
				continue // its manifest lists it
			}
			id, isManifest := strings.CutSuffix(name, ".json")
			if !isManifest || !checkpointIDRE.MatchString(id) {
				log.Warn("checkpoint list: skipped a file that is no checkpoint's", "file", filepath.Join(s.Dir, name))
				continue
			}
			m, err := s.readManifest(id)
			if errors.Is(err, ErrCheckpointNotFound) {
				continue // deleted since the directory was read
			}
			if err != nil {
				log.Warn("checkpoint list: skipped an unreadable checkpoint", "checkpoint", id, "err", err)
				continue
			}
			if !fn(m) {
				return nil
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("dockerhost: list checkpoints: %w", rerr)
		}
	}
}

// notRegularError is a file of the gateway's state (a checkpoint's, a
// kept provision env) that is a symbolic link or not a regular file (a
// FIFO, a device, a directory), which openRegular refuses: anyone who can
// write the directory could plant a link to a file the gateway may read,
// or a FIFO whose open never returns.
type notRegularError struct {
	Path string
	What string // "a symbolic link", "a named pipe", …
}

func (e *notRegularError) Error() string {
	return fmt.Sprintf("dockerhost: %s is %s, not a regular file; the gateway does not follow or read it: remove it", e.Path, e.What)
}

// openRegular opens name for reading if it is a regular file, without
// following a symbolic link in its last element (O_NOFOLLOW) or waiting
// for a FIFO's writer (O_NONBLOCK, which reads of a regular file ignore).
func openRegular(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &notRegularError{Path: name, What: "a symbolic link"}
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &notRegularError{Path: name, What: fileKind(fi.Mode())}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// readRegular is os.ReadFile through openRegular.
func readRegular(name string) ([]byte, error) {
	f, err := openRegular(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return io.ReadAll(f)
}

// fileKind names a mode's file type for a message.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// Delete removes the manifest, then the tar. Both are gone for good when
// it returns, for this store and any later one over the directory (a
// gateway killed right after); a restore that opened the tar before
// keeps reading all of it, as an unlinked file stays readable through its
// open descriptor until it is closed. A tar already missing (a damaged
// checkpoint) is no error: the checkpoint is gone either way.
func (s *LocalStore) Delete(_ context.Context, id string) error {
	if !checkpointIDRE.MatchString(id) {
		return ErrCheckpointNotFound
	}
	// The manifest first: without it the checkpoint is invisible.
	err := os.Remove(filepath.Join(s.Dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrCheckpointNotFound
	}
	if err != nil {
		return err
	}
	// The removal is on disk only once the directory is: a checkpoint
	// answered as deleted came back after a power loss. Synced before the
	// tar goes, so that no crash leaves a manifest without its tar; a tar
	// whose removal a crash undoes is a leftover sweepLeftovers removes.
	if err := durable.SyncDir(s.Dir); err != nil {
		return fmt.Errorf("dockerhost: checkpoint %s deleted, but %s could not be synced, so it may come back after a power loss (delete it again): %w", id, s.Dir, err)
	}
	if err := os.Remove(filepath.Join(s.Dir, id+".tar")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// storedSize is the size of id's tar on disk: 0 when it is missing (a
// damaged checkpoint), ok false when it is not a regular file or cannot be
// read (its manifest's size stands in).
func (s *LocalStore) storedSize(id string) (n int64, ok bool) {
	fi, err := os.Lstat(filepath.Join(s.Dir, id+".tar"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, true
	case err != nil || !fi.Mode().IsRegular():
		return 0, false
	}
	return fi.Size(), true
}

type localWriter struct {
	s    *LocalStore
	id   string
	f    *os.File
	bw   *bufio.Writer // exec output arrives in small frames
	done bool
}

func (w *localWriter) Write(p []byte) (int, error) { return w.bw.Write(p) }

func (w *localWriter) Commit(m *Manifest) error {
	if w.done {
		return errors.New("dockerhost: checkpoint writer finished")
	}
	w.done = true
	defer w.s.doneWriting(w.id)
	if err := m.Validate(); err != nil {
		w.abort()
		return err
	}
	if m.CheckpointID != w.id {
		w.abort()
		return errors.New("dockerhost: manifest checkpointId does not match the writer")
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		w.abort()
		return fmt.Errorf("dockerhost: encode manifest: %w", err)
	}
	if err := errors.Join(w.bw.Flush(), w.f.Sync(), w.f.Close()); err != nil {
		_ = os.Remove(w.f.Name())
		return fmt.Errorf("dockerhost: write checkpoint tar: %w", err)
	}
	tarPath := filepath.Join(w.s.Dir, w.id+".tar")
	// The tar's name on disk before the manifest's, which a power loss
	// could otherwise keep without it.
	if err := durable.Rename(w.f.Name(), tarPath); err != nil {
		_ = os.Remove(w.f.Name())
		_ = os.Remove(tarPath) // renamed, when the directory's sync failed
		return fmt.Errorf("dockerhost: write checkpoint tar: %w", err)
	}
	manifestPath := filepath.Join(w.s.Dir, w.id+".json")
	if err := writeFileAtomic(manifestPath, data); err != nil {
		// The manifest first, as it makes the checkpoint visible: it is
		// in place when only the directory's sync failed, and a failed
		// commit leaves no checkpoint.
		_ = os.Remove(manifestPath)
		_ = os.Remove(tarPath)
		return fmt.Errorf("dockerhost: write manifest: %w", err)
	}
	return nil
}

func (w *localWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	defer w.s.doneWriting(w.id)
	return w.abort()
}

func (w *localWriter) abort() error {
	return errors.Join(w.f.Close(), os.Remove(w.f.Name()))
}

// writeFileAtomic replaces name with data, whole or not at all, and on
// disk when it returns: the file synced, then its directory after the
// rename.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".*.partial")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Sync(), f.Close()); err == nil {
		err = durable.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
