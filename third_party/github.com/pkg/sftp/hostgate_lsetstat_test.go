//go:build linux || darwin

package sftp

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// hostgate: change 21 (HOSTGATE.md). lsetstat@openssh.com sets the times,
// mode and owner of the path itself: a symlink's times change, not its
// target's; a regular file's mode changes and, on Linux, a symlink's
// cannot (as under sshd); a size is refused; and the request parses as
// OpenSSH sends it.
func TestHostgateLsetstat(t *testing.T) {
	dir := t.TempDir()
	name, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", link); err != nil {
		t.Fatal(err)
	}
	svr := &Server{openFiles: make(map[string]file)}
	status := func(path string, flags uint32, fs *FileStat) uint32 {
		t.Helper()
		p := &sshFxpExtendedPacketLsetstat{ID: 1, Path: path, Flags: flags, Attrs: marshalFileStat(nil, flags, fs)}
		return p.respond(svr).(*sshFxpStatusPacket).StatusError.Code
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if c := status(link, sshFileXferAttrACmodTime, &FileStat{Atime: uint32(old.Unix()), Mtime: uint32(old.Unix())}); c != sshFxOk {
		t.Fatalf("times of a symlink: status %d", c)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("the symlink's mtime: %v %v, want %v", fi.ModTime(), err, old)
	}
	if fi, err := os.Stat(name); err != nil || fi.ModTime().Equal(old) {
		t.Errorf("the symlink's target's mtime changed to %v (%v)", fi.ModTime(), err)
	}
	if c := status(name, sshFileXferAttrPermissions, &FileStat{Mode: 0o600}); c != sshFxOk {
		t.Fatalf("mode of a file: status %d", c)
	}
	if c := status(link, sshFileXferAttrPermissions, &FileStat{Mode: 0o777}); runtime.GOOS == "linux" && c == sshFxOk {
		t.Error("mode of a symlink on Linux: succeeded")
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file's mode %v (%v), want 0600 (a symlink's mode change must not reach it)", fi.Mode(), err)
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if c := status(link, sshFileXferAttrUIDGID, &FileStat{UID: uid, GID: gid}); c != sshFxOk {
		t.Errorf("owner of a symlink: status %d", c)
	}
	if c := status(name, sshFileXferAttrSize, &FileStat{Size: 0}); c != sshFxBadMessage {
		t.Errorf("a size: status %d, want %d", c, sshFxBadMessage)
	}
	if fi, err := os.Stat(name); err != nil || fi.Size() != 1 {
		t.Errorf("a refused size changed the file: %v %v", fi, err)
	}

	b := marshalUint32(nil, 7)
	b = marshalString(b, "lsetstat@openssh.com")
	b = marshalString(b, link)
	b = marshalUint32(b, sshFileXferAttrPermissions)
	b = marshalUint32(b, 0o640)
	var ext sshFxpExtendedPacket
	if err := ext.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	p, ok := ext.SpecificPacket.(*sshFxpExtendedPacketLsetstat)
	if !ok || p.ID != 7 || p.Path != link || p.Flags != sshFileXferAttrPermissions || string(p.Attrs) != string(marshalUint32(nil, 0o640)) {
		t.Fatalf("parsed %#v", ext.SpecificPacket)
	}
	if err := ext.UnmarshalBinary(b[:len(b)-8]); err == nil {
		t.Fatal("an lsetstat without its flags parsed")
	}
}
