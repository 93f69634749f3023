package sshlayer

import (
	"runtime"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"golang.org/x/sys/cpu"
)

// The cipher of a connection is the first of the client's list that the
// server offers (RFC 4253 section 7.1), so each side says what is fast
// where it runs. AES-GCM with Go's assembly runs at 5.5 GB/s on this
// project's amd64 machines and chacha20-poly1305 at 1.3 (third_party
// x/crypto's change 21), but without AES instructions AES-GCM falls to
// Go's generic code: 156 MB/s against chacha20's 652 here with
// GODEBUG=cpu.aes=off, and so on a Raspberry Pi 4 or another ARM board
// without the crypto extensions, which is where many agents behind NAT
// run (chacha20 has NEON assembly on arm64 there).

// aesGCMHardware is whether AES-GCM runs in hardware here: crypto/tls's
// test (hasAESGCMHardwareSupport), which GODEBUG=cpu.aes=off turns off.
var aesGCMHardware = cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3 ||
	cpu.ARM64.HasAES && cpu.ARM64.HasPMULL ||
	cpu.S390X.HasAES && cpu.S390X.HasAESCTR && cpu.S390X.HasGHASH ||
	runtime.GOARCH == "ppc64" || runtime.GOARCH == "ppc64le"

// clientCiphers is the client's list: AES-GCM first where it runs in
// hardware, chacha20-poly1305 first where not; AES-CTR last, for servers
// with neither AEAD.
func clientCiphers(hardware bool) []string {
	if hardware {
		return []string{
			ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherChaCha20Poly1305,
			ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR,
		}
	}
	return []string{
		ssh.CipherChaCha20Poly1305, ssh.CipherAES128GCM, ssh.CipherAES256GCM,
		ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR,
	}
}

// serverCiphers is what the server offers: x/crypto's default (nil) where
// AES-GCM runs in hardware. Where it does not, AES-GCM is not offered, so
// that a client that lists it before chacha20-poly1305 (hostgate's own on
// a machine with AES instructions, Go's default) gets chacha20-poly1305;
// ordering cannot do that, the client's order decides. OpenSSH's clients
// list chacha20-poly1305 first anyway; one run with -c naming AES-GCM alone
// is refused with OpenSSH's "no matching cipher found", which lists these.
// AES-CTR stays for clients with neither AEAD.
func serverCiphers(hardware bool) []string {
	if hardware {
		return nil
	}
	return []string{ssh.CipherChaCha20Poly1305, ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR}
}
