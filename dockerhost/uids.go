package dockerhost

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// LabelUID is the host uid (and gid) an execution's processes run as; Adopt
// reads it back after a restart.
const LabelUID = "hostgate.uid"

// Sandbox uids. Every container gets a uid (and a gid of the same number)
// of its own: per-user kernel limits are counted by host uid, and with one
// uid for all sandboxes one could take what every other needs. Measured
// with 65534 for all: one sandbox held all 128 inotify instances
// (fs.inotify.max_user_instances) and inotify_init failed with EMFILE in
// every other; the same for POSIX message queues (RLIMIT_MSGQUEUE), and
// RLIMIT_NPROC and pending signals are counted the same way.
//
// The range is above every range a host gives out: login.defs allows
// regular users up to 60000 and subordinate (user namespace) ranges up to
// 600100000, and below 2^31, as some tools read a uid as a signed 32-bit
// number. Numbers are drawn at random from it, not counted up from its
// start, so that two gateways sharing one engine (different owners) that
// draw at the same moment almost never meet (takeUID).
const (
	sandboxUIDBase  = 2_000_000_000
	sandboxUIDCount = 100_000_000
)

// legacyUID is the uid of containers made before LabelUID existed; Adopt
// keeps them running as that.
const legacyUID = 65534

// initUID is the uid (and gid) of a container's PID 1 when it is the
// deadline tool (deadlineByInit): one its sandbox's processes do not run
// as, so that the kernel refuses their signals to it (kill -TERM 1, which
// it must honour for docker stop, ended the sandbox), and its own per
// container, below the sandbox range, as RLIMIT_NPROC counts every task
// of a uid: one init uid for all sandboxes would count every PID 1's
// threads against each, and a PID 1 that cannot make its threads dies.
func initUID(uid int) int { return uid - sandboxUIDCount }

// userOf is the numeric "uid:gid" an execution's processes run as.
func userOf(uid int) string { return strconv.Itoa(uid) + ":" + strconv.Itoa(uid) }

// sandboxUID reports whether uid is in the range sandboxes get.
func sandboxUID(uid int) bool {
	return uid >= sandboxUIDBase && uid < sandboxUIDBase+sandboxUIDCount
}

// parseUIDLabel is a container's uid from its LabelUID, legacyUID when it
// has none, or false when the label is not a sandbox uid.
func parseUIDLabel(labels map[string]string) (int, bool) {
	v, ok := labels[LabelUID]
	if !ok {
		return legacyUID, true
	}
	uid, err := strconv.Atoi(v)
	if err != nil || !sandboxUID(uid) || strconv.Itoa(uid) != v {
		return 0, false
	}
	return uid, true
}

// uidSet is the uids of this host's containers: live executions, warm
// containers and those being made. A uid is given out while no other
// holds it.
type uidSet struct {
	mu   sync.Mutex
	held map[int]bool
	draw func() int // a random uid of the range; tests set it
}

// take gives out a uid no other container of this host holds.
func (s *uidSet) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[int]bool{}
	}
	draw := s.draw
	if draw == nil {
		draw = drawUID
	}
	for {
		uid := draw()
		if !s.held[uid] {
			s.held[uid] = true
			return uid
		}
	}
}

func drawUID() int {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return sandboxUIDBase + int(binary.LittleEndian.Uint64(b[:])%sandboxUIDCount)
}

// takeUID gives out a uid for a container about to be made: none that a
// container on the engine carries in LabelUID, whoever made it (another
// gateway sharing the engine, a killed run of this one), and none this
// host holds (its containers being made, which the engine does not list
// yet). Drawn against this host's own uids only, two gateways on one
// engine met with odds of about N²/2×10⁸ for N live containers between
// them. The engine is asked about the drawn uid alone: a list of every
// labelled container cost about 0.5 ms a container (46 ms with 100),
// one that matches none about 1 ms.
//
// What is left is a race: two gateways that both ask before either has
// created its container, and drew the same number, one in 10⁸ for each
// such overlapping pair, however many containers live. Closing it would
// take a lock every gateway of the engine shares, which the engine does
// not offer.
func (h *Docker) takeUID(ctx context.Context) (int, error) {
	for {
		uid := h.uids.take()
		v := strconv.Itoa(uid)
		list, err := h.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelUID+"="+v))})
		if err != nil {
			h.uids.release(uid)
			return 0, fmt.Errorf("dockerhost: ask the engine whether sandbox uid %d is free: %w", uid, err)
		}
		if !slices.ContainsFunc(list, func(c container.Summary) bool { return c.Labels[LabelUID] == v }) {
			return uid, nil
		}
		// Another owner's: not ours to hold.
		h.uids.release(uid)
	}
}

// hold marks uid as held (an adopted execution's); legacy uids are shared
// and not tracked.
func (s *uidSet) hold(uid int) {
	if !sandboxUID(uid) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[int]bool{}
	}
	s.held[uid] = true
}

// release gives uid back once its container is gone.
func (s *uidSet) release(uid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, uid)
}

// len is the number of uids held.
func (s *uidSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}
