package sshlayer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// LoadOrCreateHostKey returns the SSH host key stored at path, creating it
// first when the file does not exist: a new ed25519 key in OpenSSH PEM form,
// mode 0600, in a directory created with mode 0700. Creation is race-free:
// when two processes create the key at once, both end up with the one that
// was linked into place first. Like sshd, it refuses a key file readable by
// group or others.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	s, err := loadHostKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sshlayer: host key dir: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: generate host key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "hostgate host key")
	if err != nil {
		return nil, fmt.Errorf("sshlayer: marshal host key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".host_key-*")
	if err != nil {
		return nil, fmt.Errorf("sshlayer: write host key: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// CreateTemp makes the file 0600 already; chmod states it for umask-free clarity.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("sshlayer: write host key: %w", err)
	}
	if _, err := tmp.Write(pem.EncodeToMemory(block)); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("sshlayer: write host key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("sshlayer: write host key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("sshlayer: write host key: %w", err)
	}
	// Link, unlike rename, fails when path exists: the first creator wins.
	// Its directory synced too, or a power loss can lose the new name, and
	// the gateway refuse the key made next.
	if err := durable.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("sshlayer: write host key: %w", err)
	}
	s, err = loadHostKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		// The link found the name taken, and it still reads as missing:
		// a symbolic link to nothing, which the error named as missing.
		target, _ := os.Readlink(path)
		return nil, fmt.Errorf("sshlayer: host key %s is a symbolic link to %s, which does not exist: restore its target, or remove the link to have a new key made (a gateway that pinned the old key refuses a new one until the host's key is reset there)", path, target)
	}
	return s, err
}

func loadHostKey(path string) (ssh.Signer, error) {
	// Non-blocking: a FIFO's open waits for a writer, which held the
	// agent at its start for ever, deaf to the signal that stops it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: host key: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("sshlayer: host key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("sshlayer: host key %s: not a regular file (%v): give the path of the key file itself", path, st.Mode().Type())
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("sshlayer: host key %s: permissions %#o are too open (want 0600)", path, st.Mode().Perm())
	}
	if st.Size() > 64<<10 {
		return nil, fmt.Errorf("sshlayer: host key %s: too large", path)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("sshlayer: host key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("sshlayer: host key %s: %w", path, err)
	}
	return s, nil
}
