package dockerhost

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/hostgate/hostgate/internal/textcut"
)

var errChecksum = errors.New("checkpoint tar does not match its manifest (size or sha256)")

// Checkpoint saves the execution's workspace; it waits for running execs
// and keeps new ones out while it copies. With retention set, each
// checkpoint taken kicks a sweep of the store in the background (which
// never removes the newest by MaxBytes): the answer does not wait for it.
// Without, nothing reads the store after it: the counts take it in.
func (h *Docker) Checkpoint(ctx context.Context, executionID string, req CheckpointRequest) (*Checkpoint, error) {
	cp, err := h.checkpoint(ctx, executionID, req)
	if err == nil && h.retention.on() {
		h.kickSweep()
	}
	return cp, err
}

func (h *Docker) checkpoint(ctx context.Context, executionID string, req CheckpointRequest) (*Checkpoint, error) {
	if len(req.Reason) > 1024 {
		return nil, invalid("reason", "at most 1024 bytes")
	}
	if !utf8.ValidString(req.Reason) {
		// Its manifest would keep it otherwise (Manifest.Validate).
		return nil, invalid("reason", "must be UTF-8 text")
	}
	e, err := h.live(ctx, executionID)
	if err != nil {
		return nil, err
	}
	if err := e.lock.Lock(ctx); err != nil {
		if ierr := interrupted(ctx, "the checkpoint was not taken (it waited for running commands); the execution is unchanged"); ierr != nil {
			return nil, ierr
		}
		return nil, fmt.Errorf("dockerhost: wait for running commands: %w", err)
	}
	defer e.lock.Unlock()
	if _, err := h.lookup(ctx, executionID); err != nil {
		return nil, err // ended while we waited
	}

	id := newCheckpointID()
	sw, err := h.store.Create(ctx, id)
	if err != nil {
		return nil, storageError(fmt.Errorf("dockerhost: checkpoint: %w", err))
	}
	w := &storeWriter{CheckpointWriter: sw}
	sum := sha256.New()
	cw := &countWriter{}
	// A restore gets a workspace of the same size and writes every file
	// out in full: busybox tar stores a sparse file's holes as data. A
	// checkpoint whose files would not fit is refused here, first in the
	// writers, rather than stored for every restore of it to fail.
	fit := newTarFitWriter(WorkspaceSize(e.Resources))
	if err := h.ws.Export(ctx, e.ContainerID, userOf(e.uid), io.MultiWriter(fit, w, sum, cw), maxTarBytes(e.Resources.DiskBytes)); err != nil {
		_ = w.Abort()
		// Ended under the export: its container is gone or stopping, or a
		// Terminate has already forgotten it (the container may still be
		// in removal, tar killed: an engine error otherwise).
		if _, lerr := h.lookup(ctx, executionID); lerr != nil || h.containerGone(e.ContainerID) {
			h.forget(executionID, e, EndContainerGone)
			return nil, &Error{Code: CodeGone, Message: fmt.Sprintf("execution %q ended during the checkpoint", executionID), Err: err}
		}
		if ierr := interrupted(ctx, cutCheckpoint); ierr != nil {
			return nil, ierr
		}
		var wf *errWontFit
		if errors.As(err, &wf) {
			return nil, &Error{Code: CodeConflict, Err: err, Message: fmt.Sprintf(
				"the workspace cannot be checkpointed: a restore writes its files out in full, %d bytes or more, "+
					"into a workspace of %d bytes (resources.diskBytes), and sparse files are stored in full "+
					"(the largest file is %q, %d bytes); remove or shrink the sparse or largest files and try again",
				wf.need, wf.limit, wf.largest, wf.largestSize)}
		}
		if errors.Is(err, errTooManyReadOnlyDirs) {
			return nil, &Error{Code: CodeConflict, Err: err, Message: fmt.Sprintf(
				"the workspace cannot be checkpointed: it holds more than %d MiB of names of directories their owner cannot write into, "+
					"which a restore makes writable while it unpacks them and remembers to make read-only again; "+
					"make some of them writable (chmod -R u+w on a tree of them) and try again", maxFixedDirBytes>>20)}
		}
		return nil, exportError(fmt.Errorf("dockerhost: checkpoint: %w", err), e.Resources.DiskBytes)
	}
	if ierr := interrupted(ctx, cutCheckpoint); ierr != nil {
		// Copied, but its caller would never learn its id.
		_ = w.Abort()
		return nil, ierr
	}
	m := &Manifest{
		Version:      ManifestVersion,
		CheckpointID: id,
		ExecutionID:  executionID,
		CreatedAt:    h.now().UTC(),
		Reason:       req.Reason,
		SizeBytes:    cw.n,
		SHA256:       hex.EncodeToString(sum.Sum(nil)),
		Request:      e.req,
	}
	since := h.cpStats.countSince()
	if err := w.Commit(m); err != nil {
		return nil, storageError(fmt.Errorf("dockerhost: checkpoint: %w", err))
	}
	h.countChange(id, h.storedBytes(m), true, since)
	h.logger.Info("checkpoint", "execution", executionID, "checkpoint", id, "bytes", m.SizeBytes)
	return &Checkpoint{CheckpointID: id, ExecutionID: executionID, CreatedAt: m.CreatedAt, SizeBytes: m.SizeBytes, SHA256: m.SHA256}, nil
}

// cutCheckpoint says what a checkpoint cut by ErrStopping left.
const cutCheckpoint = "the checkpoint was cut and nothing of it kept; the execution is unchanged"

// Restore provisions a new execution from a checkpoint: the complete
// provision validation of the recorded request, then the workspace tar
// streamed in, bounded by its recorded size and verified against its
// sha256. A tampered tar fails and leaves no container.
func (h *Docker) Restore(ctx context.Context, rr RestoreRequest) (*Execution, error) {
	if rr.CheckpointID == "" {
		return nil, invalid("checkpointId", "is required: the id POST /v1/executions/{id}/checkpoints answered")
	}
	if !checkpointIDRE.MatchString(rr.CheckpointID) {
		return nil, invalid("checkpointId", "must be 32 lowercase hex digits")
	}
	// Retention leaves it alone meanwhile; a delete does not wait for
	// the restore, which reads the tar it opened to the end.
	h.startReading(rr.CheckpointID)
	defer h.doneReading(rr.CheckpointID)
	m, rc, err := h.openCheckpoint(ctx, rr.CheckpointID)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	req := m.Request
	req.ExecutionID = rr.ExecutionID
	req.Env = rr.Env
	// The workspace comes from the tar, not from the original source.
	req.Workspace = WorkspaceSpec{Kind: WorkspaceEmpty}
	if p := req.Resources.Pids; p > 0 && p < minResources.Pids {
		// Checkpointed under an older, lower minimum (8, then 16): a
		// restore cannot change its resources, and the least pids now is
		// what a sandbox's own threads and its commands need.
		h.logger.Info("restore raises pids to the least allowed", "checkpoint", rr.CheckpointID, "pids", p, "now", minResources.Pids)
		req.Resources.Pids = minResources.Pids
	}
	if err := h.policy.ValidateProvision(&req); err != nil {
		return nil, fromCheckpoint(err)
	}
	want, err := hex.DecodeString(m.SHA256)
	if err != nil {
		return nil, &Error{Code: CodeInvalidRequest, Field: "checkpointId", Message: "the checkpoint is unreadable", Err: err}
	}
	load := func(ctx context.Context, cid, user string) error {
		vr := &verifyingReader{r: rc, left: m.SizeBytes, sum: sha256.New(), want: want}
		err := h.ws.Import(ctx, cid, user, vr, m.SizeBytes)
		if errors.Is(err, errNoChmod) {
			// The files are all there; only those directories' owner
			// write bit is not as it was.
			h.logger.Warn("restore: read-only directories left writable", "checkpoint", rr.CheckpointID, "err", err)
			err = nil
		}
		if err == nil {
			// tar stops reading at its end-of-archive blocks: verify the
			// rest too, or a tampered tail would pass.
			err = vr.finish(ctx)
		} else if !errors.Is(err, errChecksum) {
			// tar failed before the end (a corrupted header, a name it
			// refuses): the rest decides whether the checkpoint was
			// tampered with, which the caller should hear rather than
			// an engine failure.
			if ferr := vr.finish(ctx); errors.Is(ferr, errChecksum) {
				err = ferr
			}
		}
		var ue *unpackError
		switch {
		case errors.Is(err, errChecksum):
			return &Error{Code: CodeInvalidRequest, Field: "checkpointId", Message: errChecksum.Error(), Err: err}
		case errors.Is(err, errTarTooLarge):
			return &Error{Code: CodeInvalidRequest, Field: "checkpointId", Message: "the checkpoint does not fit in resources.diskBytes", Err: err}
		case errors.Is(err, errTooManyReadOnlyDirs):
			// Taken before checkpoints measured it, or not made by one:
			// every restore of it fails alike, which answered 502, the
			// engine's failure.
			return &Error{Code: CodeInvalidRequest, Field: "checkpointId", Err: err, Message: fmt.Sprintf(
				"the checkpoint cannot be restored: it holds more than %d MiB of names of directories their owner cannot write into, "+
					"more than a restore makes writable while it unpacks them; restore another checkpoint", maxFixedDirBytes>>20)}
		case errors.As(err, &ue):
			// An archive written to reach out of the workspace (a hard
			// link to /etc/passwd, a file through a symbolic link), its
			// manifest made to match: the checkpoint, not the engine, is
			// what failed, and it answered 502 "the container engine
			// failed".
			h.logger.Warn("restore: the checkpoint's archive does not unpack; was the checkpoint store changed?", "checkpoint", rr.CheckpointID, "err", err)
			return &Error{Code: CodeInvalidRequest, Field: "checkpointId", Err: err,
				Message: "the checkpoint's archive does not unpack into a workspace (" + textcut.Cut(ue.out, maxEngineWords) + "): it holds what a checkpoint of a workspace would not, so it was changed in the checkpoint store or not made by a checkpoint; restore another checkpoint"}
		}
		return err
	}
	return h.provision(ctx, req, rr.CheckpointID, load)
}

// fromCheckpoint says so of a refused field that Restore took from the
// checkpoint's recorded request: its caller sent only checkpointId,
// executionId and env, and read "resources.cpus: must be between …" as
// about a field it never sent (a checkpoint from a larger gateway).
func fromCheckpoint(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Field == "" || e.Field == "executionId" || e.Field == "env" || strings.HasPrefix(e.Field, "env.") {
		return err
	}
	c := *e
	c.Message += " (the checkpoint's value: a restore keeps the image, resources and network of the execution the checkpoint was taken from)"
	return &c
}

// verifyingReader passes exactly left bytes through a hash and fails with
// errChecksum at EOF when the size or the sum differ.
type verifyingReader struct {
	r    io.Reader
	left int64
	sum  hash.Hash
	want []byte
	done bool
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.done {
		return 0, io.EOF
	}
	if int64(len(p)) > v.left+1 {
		p = p[:v.left+1] // one extra byte detects a longer tar
	}
	n, err := v.r.Read(p)
	v.left -= int64(n)
	if v.left < 0 {
		return 0, errChecksum
	}
	v.sum.Write(p[:n])
	if err == io.EOF {
		if v.left != 0 || subtle.ConstantTimeCompare(v.sum.Sum(nil), v.want) != 1 {
			return n, errChecksum
		}
		v.done = true
	}
	return n, err
}

// finish reads what the consumer left unread and verifies the whole. It
// gives up once ctx ends (context.Cause): a restore cut then fails
// whatever the rest holds, and the rest may be tens of GiB, which a
// gateway stopping would otherwise wait to have read and hashed.
func (v *verifyingReader) finish(ctx context.Context) error {
	buf := make([]byte, 256<<10)
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		_, err := v.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// exportError names what failed an export that was neither the
// execution ending nor its files outgrowing a restore: the workspace's
// own content (tar could not read it, or its archive passed the limit) or
// the checkpoint storage. Anything else is the engine's.
func exportError(err error, diskBytes int64) error {
	var xe *execExit
	var stalled *errExportStalled
	switch {
	case errors.As(err, new(*storeWriteError)):
		return storageError(err)
	case errors.Is(err, errTarTooLarge):
		return &Error{Code: CodeConflict, Err: err, Message: fmt.Sprintf(
			"the workspace cannot be checkpointed: its archive passes %d bytes, the most one of resources.diskBytes %d may take "+
				"(every file adds a 512-byte tar header, and sparse files are stored in full); remove files and try again",
			maxTarBytes(diskBytes), diskBytes)}
	case errors.As(err, &stalled):
		// Sandbox code holds it (defaultExportIdle says how); Export
		// gives up rather than hold the checkpoint, and the execution's
		// commands behind it, for as long as the caller waits.
		return &Error{Code: CodeConflict, Err: err, Message: fmt.Sprintf(
			"the workspace cannot be checkpointed: tar wrote nothing of it for %v, held by the execution: "+
				"a file swapped for a named pipe (FIFO) as tar read it, whose open waits for a writer, or tar stopped (kill -STOP) by a process of the sandbox; "+
				"stop what swaps files or signals processes in /workspace while a checkpoint runs (find /workspace -type p lists the pipes), and try again "+
				"(the held tar ends once its pipe has a writer, or with the execution)",
			stalled.idle)}
	case errors.As(err, &xe) && xe.argv0 == "tar":
		fix := "make what it names readable by its owner (chmod -R u+rX /workspace) or remove it"
		if strings.Contains(xe.out, "too long") {
			// A tree deeper than a path may be: no mode makes tar reach
			// it, and rm -r cannot reach it either.
			fix = "a path in it is longer than tar can archive (4096 bytes): shorten it (move what it names nearer /workspace with mv; rm -r fails on it too) or remove it"
		}
		return &Error{Code: CodeConflict, Err: err, Message: fmt.Sprintf(
			"the workspace cannot be checkpointed: tar could not archive it (%s); %s, and try again", toolWords(xe.out), fix)}
	}
	return err
}

// storageError answers a checkpoint storage failure the gateway's
// operator can act on (a full or read-only directory) as such; the
// engine is not at fault.
func storageError(err error) error {
	var what string
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		what = "is full (no space left on device); free space there or delete old checkpoints"
	case errors.Is(err, syscall.EROFS):
		what = "is on a read-only file system; make it writable"
	case errors.Is(err, fs.ErrPermission):
		what = "is not writable by the gateway (permission denied); fix its ownership or mode"
	default:
		return err
	}
	return &Error{Code: CodeStorageUnavailable, Err: err, Message: "the gateway's checkpoint storage " + what + "; the execution is unchanged"}
}

// storeWriteError marks a failed write to the checkpoint store, apart
// from the engine's and tar's failures in the same export.
type storeWriteError struct{ err error }

func (e *storeWriteError) Error() string { return "write checkpoint: " + e.err.Error() }
func (e *storeWriteError) Unwrap() error { return e.err }

type storeWriter struct{ CheckpointWriter }

func (w *storeWriter) Write(p []byte) (int, error) {
	n, err := w.CheckpointWriter.Write(p)
	if err != nil {
		err = &storeWriteError{err: err}
	}
	return n, err
}
