//go:build unix

package sshlayer

import (
	"net"
	"slices"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// The cipher each side negotiates, hostgate's client and server, on
// machines with and without AES instructions. Not parallel: it sets the
// package's aesGCMHardware and preferredCiphers, which NewServer and
// Connect read, while no parallel test runs.
func TestCipherByHardware(t *testing.T) {
	savedHW, savedList := aesGCMHardware, preferredCiphers
	t.Cleanup(func() { aesGCMHardware, preferredCiphers = savedHW, savedList })
	for _, c := range []struct {
		name           string
		client, server bool // AES instructions on each side
		want           string
	}{
		{"both have them", true, true, ssh.CipherAES128GCM},
		{"the server has none", true, false, ssh.CipherChaCha20Poly1305},
		{"the client has none", false, true, ssh.CipherChaCha20Poly1305},
		{"neither has", false, false, ssh.CipherChaCha20Poly1305},
	} {
		t.Run(c.name, func(t *testing.T) {
			aesGCMHardware = c.server
			ts := srvStartServer(t, nil)
			aesGCMHardware = savedHW
			preferredCiphers = clientCiphers(c.client)
			conn, err := net.Dial("tcp", ts.Addr)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := Connect(t.Context(), conn, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
			preferredCiphers = savedList
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			algs := cl.SSH().Conn.(ssh.AlgorithmsConnMetadata).Algorithms()
			if algs.Read.Cipher != c.want || algs.Write.Cipher != c.want {
				t.Errorf("negotiated %s and %s, want %s both ways", algs.Read.Cipher, algs.Write.Cipher, c.want)
			}
			// A round trip on the cipher.
			if _, _, err := cl.SSH().SendRequest("keepalive@openssh.com", true, nil); err != nil {
				t.Fatalf("a request on the connection: %v", err)
			}
		})
	}
}

// A server without AES instructions offers no AES-GCM at all (the
// client's order decides), and keeps AES-CTR for clients with neither
// AEAD.
func TestServerCiphersWithoutAES(t *testing.T) {
	if serverCiphers(true) != nil {
		t.Errorf("with AES instructions: %v, want x/crypto's default", serverCiphers(true))
	}
	got := serverCiphers(false)
	if got[0] != ssh.CipherChaCha20Poly1305 || slices.Contains(got, ssh.CipherAES128GCM) || slices.Contains(got, ssh.CipherAES256GCM) || !slices.Contains(got, ssh.CipherAES128CTR) {
		t.Errorf("without: %v, want chacha20-poly1305 first, no AES-GCM, AES-CTR kept", got)
	}
}
