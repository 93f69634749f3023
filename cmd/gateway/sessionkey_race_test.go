package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// TestSessionKeyMadeOnceConcurrently: the first ssh runs after setup (an
// ssh to several hosts at once) each run `gateway cert` with no key yet.
// Each made a key and renamed it into place, the last one won, and the
// others asked for (and wrote) certificates of keys no file held: ssh
// then offered a certificate that did not match its private key, and was
// refused. Every run uses the one key the file ends up with, and
// KEY.pub is its public half.
func TestSessionKeyMadeOnceConcurrently(t *testing.T) {
	const runs = 8
	path := filepath.Join(t.TempDir(), "ssh", "hostgate_ed25519")
	keys := make([]ssh.PublicKey, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			k, err := sessionKey(path)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	want := signer.PublicKey().Marshal()
	for i, k := range keys {
		if !bytes.Equal(k.Marshal(), want) {
			t.Errorf("run %d of %d got key %s, the file holds %s", i, runs, ssh.FingerprintSHA256(k), ssh.FingerprintSHA256(signer.PublicKey()))
		}
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if got, wantPub := strings.TrimSpace(string(pub)), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); got != wantPub {
		t.Errorf("KEY.pub holds %s, the key is %s", got, wantPub)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the private key's mode: %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}
