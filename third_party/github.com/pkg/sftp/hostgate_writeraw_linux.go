//go:build linux

package sftp

import (
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawWriteSlow is how long one raw pwrite may take, its thread having
// slept in it, before the handle's writes go back to the runtime's call:
// such a write waited (write-back throttling, the journal, reclaim) and
// held its P meanwhile. A thread the scheduler only preempted (a busy
// machine) did not sleep and keeps its raw writes.
var rawWriteSlow = 2 * time.Millisecond

// slept reports whether the thread's voluntary context switches went
// from before to after; a test's hook.
var slept = func(before, after int64) bool { return after > before }

// rawPwrite says the server's writes may be raw pwrite(2) calls here:
// only 64-bit Linux passes pwrite64's offset in one register. 32-bit ABIs
// split it in two, and ARM's and MIPS's put a pad word before the pair, so
// a raw call built for one of them wrote elsewhere on the others (on
// 32-bit ARM at offset 0); there the writes go through os.File.WriteAt,
// which knows each ABI.
const rawPwrite = unsafe.Sizeof(uintptr(0)) == 8

// rawWritable reports whether f's writes may be raw pwrite(2) calls
// (HOSTGATE.md, change 19): a regular file, not in append mode, on a
// local file system, whose writes into the page cache do not wait on a
// network or a FUSE daemon.
func rawWritable(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return
		}
		if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err != nil || fl&unix.O_APPEND != 0 {
			return // os.File.WriteAt refuses these: it says why
		}
		var fs unix.Statfs_t
		if unix.Fstatfs(int(fd), &fs) != nil {
			return
		}
		switch uint32(fs.Type) {
		case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC,
			unix.TMPFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC:
			ok = true
		}
	})
	return ok
}

// writeAtRaw writes b (not empty) at off with one raw pwrite(2), retrying
// EINTR: the bytes written, an errno (for the caller to leave to
// os.File.WriteAt, which says it), and whether the call was slow (see
// rawWriteSlow).
func writeAtRaw(f *os.File, b []byte, off int64) (n int, errno syscall.Errno, slow bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, syscall.EBADF, false
	}
	var r uintptr
	if err := rc.Control(func(fd uintptr) {
		slow = timedRaw(func() {
			for {
				r, _, errno = syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
				if errno != syscall.EINTR {
					return
				}
			}
		})
	}); err != nil {
		return 0, syscall.EBADF, false
	}
	if errno != 0 {
		return 0, errno, slow
	}
	return int(r), 0, slow
}

// timedRaw runs call, raw system calls on a file, and reports whether it
// was slow, its thread having slept in it (see rawWriteSlow). The
// thread's voluntary switches are read before and after on one thread.
func timedRaw(call func()) (slow bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ru unix.Rusage
	_, _, _ = syscall.RawSyscall(syscall.SYS_GETRUSAGE, unix.RUSAGE_THREAD, uintptr(unsafe.Pointer(&ru)), 0)
	before := int64(ru.Nvcsw) // int32 on 32-bit Linux
	start := time.Now()
	call()
	if time.Since(start) <= rawWriteSlow {
		return false
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_GETRUSAGE, unix.RUSAGE_THREAD, uintptr(unsafe.Pointer(&ru)), 0)
	return slept(before, int64(ru.Nvcsw))
}

// rawBackoff says whether a file's next write may be raw: after a slow
// one (its thread slept), the next 64 go through the runtime, the time
// after 128, doubling up to 16,384 (4 GiB of 255 KiB writes). A sleep
// holds the P, which sporadic waits (the journal) should not cost the
// fast path and sustained ones (write-back throttling) should not cost
// the process.
type rawBackoff struct {
	skip, last int
}

// use reports whether this write may be raw, counting one skipped if not.
func (b *rawBackoff) use() bool {
	if b.skip > 0 {
		b.skip--
		return false
	}
	return true
}

// slowed records a raw write that was slow.
func (b *rawBackoff) slowed() {
	b.last = min(max(2*b.last, 64), 1<<14)
	b.skip = b.last
}
