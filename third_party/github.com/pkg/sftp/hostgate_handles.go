package sftp

import "fmt"

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

// errTooManyHandles is the answer to an open past MaxOpenHandles: a
// Failure, as OpenSSH's sftp-server answers an open past its descriptors,
// whose text says what the bound is and what to do.
func errTooManyHandles(path string) error {
	return fmt.Errorf("open %s: this sftp session holds %d open files and directories, the most it may: close some before opening more", path, MaxOpenHandles)
}

// reserveHandle takes room for one more handle before its file is
// opened, so that an open refused at the bound has not created or
// truncated the file (O_CREAT, O_TRUNC); false: no room. The caller
// gives the room back with releaseHandle once the handle is in openFiles,
// or the open failed.
func (svr *Server) reserveHandle() bool {
	svr.openFilesLock.Lock()
	defer svr.openFilesLock.Unlock()
	if len(svr.openFiles)+svr.opening >= MaxOpenHandles {
		return false
	}
	svr.opening++
	return true
}

func (svr *Server) releaseHandle() {
	svr.openFilesLock.Lock()
	defer svr.openFilesLock.Unlock()
	svr.opening--
}
