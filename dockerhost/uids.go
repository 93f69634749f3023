package dockerhost

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"sync"
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
// start, so that two gateways sharing one engine (different owners, each
// knowing only its own executions) almost never give out the same one.
const (
	sandboxUIDBase  = 2_000_000_000
	sandboxUIDCount = 100_000_000
)

// legacyUID is the uid of containers made before LabelUID existed; Adopt
// keeps them running as that.
const legacyUID = 65534

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
}

// take gives out a uid no other container of this host holds.
func (s *uidSet) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[int]bool{}
	}
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		uid := sandboxUIDBase + int(binary.LittleEndian.Uint64(b[:])%sandboxUIDCount)
		if !s.held[uid] {
			s.held[uid] = true
			return uid
		}
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
