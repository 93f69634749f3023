package main

import (
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// An agent on a machine without AES instructions (a Raspberry Pi 4, many
// ARM boards; GODEBUG=cpu.aes=off stands in for one) offers no AES-GCM,
// which Go runs there in generic code at a quarter of chacha20's speed or
// less: a client that lists AES-GCM first, as hostgate's own does on a
// machine with the instructions, gets chacha20-poly1305, and ssh naming
// AES-GCM alone is told that no cipher matches.
func TestServeWithoutAESInstructions(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("GODEBUG=cpu.aes=off is x/sys/cpu's on amd64 and arm64 only")
	}
	const gcmFirst = "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr"
	hardware := cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3 || cpu.ARM64.HasAES && cpu.ARM64.HasPMULL // sshlayer's aesGCMHardware
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"this machine", nil, map[bool]string{true: "aes128-gcm@openssh.com", false: "chacha20-poly1305@openssh.com"}[hardware]},
		{"cpu.aes=off", []string{"GODEBUG=cpu.aes=off"}, "chacha20-poly1305@openssh.com"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := startServeListen(t, c.env)
			out, err := a.ssh("-v", "-c", gcmFirst, "true").CombinedOutput()
			if err != nil {
				t.Fatalf("ssh -c %s: %v\n%s", gcmFirst, err, out)
			}
			if !strings.Contains(string(out), "kex: server->client cipher: "+c.want) {
				t.Errorf("ssh -c %s did not get %s:\n%s", gcmFirst, c.want, out)
			}
			if c.env == nil {
				return
			}
			out, err = a.ssh("-c", "aes128-gcm@openssh.com", "true").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "no matching cipher found") {
				t.Errorf("ssh -c aes128-gcm@openssh.com: %v, want no matching cipher:\n%s", err, out)
			}
		})
	}
}
