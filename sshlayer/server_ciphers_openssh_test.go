//go:build linux

package sshlayer

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// Every cipher OpenSSH's ssh offers by default that the server takes
// carries a command's input and output intact, many packets each way:
// chacha20-poly1305@openssh.com, OpenSSH's first choice, is what an ssh
// without -c gets, and on amd64 its payload goes through the AEAD's
// assembly (third_party x/crypto, change 21), which a difference in key
// stream, nonce or counter would turn into a MAC failure or other bytes.
func TestOpenSSHCiphers(t *testing.T) {
	t.Parallel()
	_, o := srvOpenSSHServer(t, nil)
	data := make([]byte, 3<<20+12345) // about 100 packets of 32 KiB each way
	_, _ = rand.Read(data)
	want := fmt.Sprintf("%x", sha256.Sum256(data))
	for _, c := range []string{"chacha20-poly1305@openssh.com", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr"} {
		t.Run(c, func(t *testing.T) {
			cmd := o.command(srvTestCtx(t), "ssh", "-c", c, "-v", "127.0.0.1", "cat")
			cmd.Stdin = bytes.NewReader(data)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("ssh -c %s: %v\n%s", c, err, tail(stderr.String()))
			}
			log := stderr.String()
			if !strings.Contains(log, "cipher: "+c) {
				t.Fatalf("ssh -c %s did not negotiate it:\n%s", c, tail(log))
			}
			if got := fmt.Sprintf("%x", sha256.Sum256(stdout.Bytes())); got != want {
				t.Errorf("ssh -c %s: the host's echo of %d bytes came back as %d bytes, sha256 %s", c, len(data), stdout.Len(), got)
			}
		})
	}
}

// tail is the end of a long log, for a failure's message.
func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}
