package sftp

import (
	"fmt"
	"sync"
)

// MaxOpenHandles bounds the files and directories one Server session
// holds open (hostgate: change 35, HOSTGATE.md). The server runs inside
// the SSH server's process, so each handle is one of that process's file
// descriptors: a client that opened without closing (a hostile caller, a
// program's leak) ran the process out of them, and every other session,
// exec and forward of the host failed with EMFILE. OpenSSH's sftp-server
// is a process of its own per session, bounded by its RLIMIT_NOFILE (it
// tells clients RLIMIT_NOFILE-5 in limits@openssh.com: 1019 at the usual
// 1024), so no client written against it holds more than about a
// thousand; 4096 is four times that.
const MaxOpenHandles = 4096

// hostgate (change 37): the handles of every Server of the process,
// bounded by processHandleMax, so that sessions together (64 of them on
// one SSH connection of hostgate's) leave the process descriptors of its
// own.
var processHandles struct {
	sync.Mutex
	n int
}

// processHandleMax is the bound on processHandles: half the process's
// descriptor limit, read once; 0: none (no such limit here). A var so
// that tests can lower it.
var processHandleMax = sync.OnceValue(func() int { return fdLimit() / 2 })

// errTooManyHandles is the answer to an open past MaxOpenHandles: a
// Failure, as OpenSSH's sftp-server answers an open past its descriptors,
// whose text says what the bound is and what to do.
func errTooManyHandles(path string) error {
	return fmt.Errorf("open %s: this sftp session holds %d open files and directories, the most it may: close some before opening more", path, MaxOpenHandles)
}

// errProcessHandles is the answer to an open past processHandleMax.
func errProcessHandles(path string, max int) error {
	return fmt.Errorf("open %s: this host's sftp sessions hold %d open files and directories, the most they may together (half its process's open file limit): close some, here or in other sessions, before opening more", path, max)
}

// reserveHandle takes room for one more handle before its file is
// opened, so that an open refused at a bound has not created or
// truncated the file (O_CREAT, O_TRUNC); an error: no room. The caller
// gives the room back with releaseHandle once the handle is in openFiles
// (made with addHandle, counted), or the open failed.
func (svr *Server) reserveHandle(path string) error {
	svr.openFilesLock.Lock()
	defer svr.openFilesLock.Unlock()
	if len(svr.openFiles)+svr.opening >= MaxOpenHandles {
		return errTooManyHandles(path)
	}
	if max := processHandleMax(); max > 0 {
		processHandles.Lock()
		defer processHandles.Unlock()
		if processHandles.n >= max {
			return errProcessHandles(path, max)
		}
		processHandles.n++
	}
	svr.opening++
	return nil
}

// releaseHandle gives back reserveHandle's room; opened: the handle is in
// openFiles, and keeps its process-wide room until it is closed
// (unreserve).
func (svr *Server) releaseHandle(opened bool) {
	svr.openFilesLock.Lock()
	defer svr.openFilesLock.Unlock()
	svr.opening--
	if !opened {
		unreserve()
	}
}

// unreserve gives back a handle's process-wide room.
func unreserve() {
	if processHandleMax() > 0 {
		processHandles.Lock()
		processHandles.n--
		processHandles.Unlock()
	}
}

// closed gives back f's process-wide room if it took one.
func closed(f file) {
	if sw, ok := f.(*serialWrites); ok && sw.counted {
		unreserve()
	}
}
