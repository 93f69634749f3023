//go:build !(linux || darwin)

package sftp

// hostgate: change 21 (HOSTGATE.md). Elsewhere lsetstat@openssh.com is
// answered as not supported.

func lsetstatChmod(path string, mode uint32) error           { return ErrSSHFxOpUnsupported }
func lsetstatChtimes(path string, atime, mtime uint32) error { return ErrSSHFxOpUnsupported }
func lsetstatChown(path string, uid, gid uint32) error       { return ErrSSHFxOpUnsupported }
