package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/textcut"
	"github.com/hostgate/hostgate/internal/tlshint"
	"github.com/hostgate/hostgate/sshlayer"
)

func init() {
	register("cert", "cert HOST: keep an OpenSSH key's certificate for HOST fresh (and its known_hosts line)", runCert)
}

// runCert keeps what OpenSSH needs to reach a host through the gateway up
// to date: a session key (made once), its short-lived certificate for the
// host (renewed when it has less than --min-valid left, so a run with a
// fresh one makes no request and can sit in an ssh_config `Match exec`),
// and the host's pinned key in a known_hosts file. HOST is the id as the
// gateway spells it: ssh_config's %n, not %h, which ssh lower-cases.
func runCert(ctx context.Context, sio stdio, args []string) error {
	var gw, token, key, certPath, knownHosts, caFile string
	var minValid time.Duration
	// No home ($HOME unset: cron, a service): no default key, where
	// ".ssh/hostgate_ed25519" made the private key under the directory
	// ssh ran in (a repository's work tree).
	defaultKey := ""
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		defaultKey = filepath.Join(home, ".ssh", "hostgate_ed25519")
	}
	fs := newFlags("cert", sio)
	fs.StringVar(&gw, "url", "", "gateway URL (http(s)://)")
	fs.StringVar(&token, "token", "", "client or admin token")
	fs.StringVar(&caFile, "ca-file", "", caFileUsage)
	fs.StringVar(&key, "key", defaultKey, "the session key's private key file; made (ed25519, with KEY.pub) when missing")
	fs.StringVar(&certPath, "cert", "", "where the certificate goes (default KEY-HOST-cert.pub: a certificate names one host, so each host has its own; ssh_config's CertificateFile KEY-%n-cert.pub finds it)")
	var force bool
	fs.BoolVar(&force, "force", false, "renew the certificate and rewrite the known_hosts line even when fresh (after gateway host reset-key)")
	fs.StringVar(&knownHosts, "known-hosts", "", "a known_hosts file to hold the host's pinned key (empty: leave known_hosts alone)")
	fs.DurationVar(&minValid, "min-valid", time.Minute, "renew the certificate when it has less than this left")
	const usage = "usage: gateway cert [--url URL] [--token TOKEN] [--ca-file FILE] [--key FILE] [--cert FILE] [--known-hosts FILE] [--min-valid DURATION] [--force] HOST"
	if err := parseUsage(fs, args, usage); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(sio.err, usage)
		return errUsage
	}
	host := fs.Arg(0)
	if key == "" {
		return errors.New("cert: --key is needed: there is no home directory ($HOME) for the default ~/.ssh/hostgate_ed25519; give --key FILE (and use the same in ssh's IdentityFile)")
	}
	if certPath == "" {
		certPath = key + "-" + host + "-cert.pub"
	}
	pub, err := sessionKey(key)
	if err != nil {
		return err
	}
	// A fresh certificate and a known_hosts line for the host: nothing to
	// ask. A line pinning a key the gateway has since reset is mended by
	// `gateway proxy --known-hosts` on the next connection, or here at the
	// next renewal or with --force.
	if !force && certFresh(certPath, pub, host, minValid) && (knownHosts == "" || hasKnownHost(knownHosts, host)) {
		return nil
	}
	if gw == "" || token == "" {
		return errors.New("cert: --url and --token (or HOSTGATE_URL, HOSTGATE_TOKEN) are required to renew the certificate")
	}
	var opts client.Options
	if caFile != "" {
		if opts.RootCAs, err = tlshint.CAFile(caFile); err != nil {
			return fmt.Errorf("cert: %w", err)
		}
	}
	c, err := client.New(gw, token, &opts)
	if err != nil {
		return fmt.Errorf("cert: %w", err) // names the URL or the token
	}
	cert, err := c.Certificate(ctx, host, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))))
	if err != nil {
		return certHostError(host, err)
	}
	if err := writeAtomic(certPath, []byte(strings.TrimSpace(cert.Certificate)+"\n"), 0o644); err != nil {
		return fmt.Errorf("cert: %w", err)
	}
	if knownHosts != "" {
		hostKey := cert.HostPublicKey
		if hostKey == "" {
			// An older gateway names the key by fingerprint only.
			rec, err := c.Host(ctx, host)
			if err != nil {
				return certHostError(host, err)
			}
			hostKey = rec.HostPublicKey
		}
		if _, current, err := knownHostLine(knownHosts, host, hostKey); err == nil && current {
			return nil // already so: an ssh reading it meanwhile sees the same
		}
		if err := pinKnownHost(knownHosts, host, hostKey); err != nil {
			return fmt.Errorf("cert: --known-hosts: %w", err)
		}
	}
	return nil
}

// certHostError is a failed API call of gateway cert for host, told under
// the host's name, which the gateway's message in it then leaves out.
func certHostError(host string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		ae.Message = wire.TrimHost(host, ae.Message)
	}
	// The client has named the fix of an untrusted certificate already.
	return printableError{fmt.Errorf("cert: host %s: %w", host, err)}
}

// sessionKey returns the public key of the private key at path, making an
// ed25519 pair (path and path.pub) when there is none.
func sessionKey(path string) (ssh.PublicKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, gerr := sshlayer.GenerateSessionKey()
		if gerr != nil {
			return nil, gerr
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("cert: --key: %w", err)
		}
		// Made only where no other run made one meanwhile: the first ssh
		// runs after setup (to several hosts at once) each run this, and
		// a key renamed over another's left that run's certificate for a
		// key no file held, which ssh offered and the host refused.
		err := writeNew(path, k.PrivateKey, 0o600)
		if errors.Is(err, fs.ErrExist) {
			if b, err = os.ReadFile(path); err != nil {
				// A name there that reads as missing: a symlink to
				// nothing.
				return nil, fmt.Errorf("cert: --key: %w (a link to a file that is not there? point --key at a file, or remove the link to have one made)", err)
			}
			return parseSessionKey(path, b)
		}
		if err != nil {
			return nil, fmt.Errorf("cert: --key: %w", err)
		}
		if err := writeAtomic(path+".pub", []byte(k.PublicKey+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("cert: --key: %w", err)
		}
		return k.Signer.PublicKey(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("cert: --key: %w", err)
	}
	return parseSessionKey(path, b)
}

// parseSessionKey is the public key of the private key b read from path.
func parseSessionKey(path string, b []byte) (ssh.PublicKey, error) {
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("cert: --key %s: %w (a private key without a passphrase is needed; gateway cert makes one when the file is missing)", path, err)
	}
	return signer.PublicKey(), nil
}

// certFresh reports whether the certificate at path is for pub and host
// and valid for at least minValid more.
func certFresh(path string, pub ssh.PublicKey, host string, minValid time.Duration) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return false
	}
	cert, ok := k.(*ssh.Certificate)
	if !ok || !bytes.Equal(cert.Key.Marshal(), pub.Marshal()) || !slices.Contains(cert.ValidPrincipals, host) {
		return false
	}
	if cert.ValidBefore == ssh.CertTimeInfinity {
		return true
	}
	return time.Now().Add(minValid).Before(time.Unix(int64(cert.ValidBefore), 0))
}

// hasKnownHost reports whether the known_hosts file names host.
func hasKnownHost(path, host string) bool {
	keys, err := knownHostKeys(path, host)
	return err == nil && len(keys) > 0
}

// knownHostKeys returns the keys ("type base64") the known_hosts file at
// path gives host, as pinKnownHost writes them; a missing file has none.
func knownHostKeys(path, host string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 3 {
			if _, ok := knownHostNamed(f[0], host); ok {
				keys = append(keys, f[1]+" "+f[2])
			}
		}
	}
	return keys, nil
}

// knownHostNamed reports whether name, a known_hosts line's first field,
// names host: as written, or hashed (hashed true), as ssh writes it with
// HashKnownHosts yes (Debian's default) and ssh-keygen -H rewrites a file:
// "|1|" base64(salt) "|" base64(HMAC-SHA1 of the name keyed by salt),
// OpenSSH's host_hash and x/crypto's knownhosts.HashHostname. Taken for
// another host's, a stale one (a key reset since) was left by the proxy
// (ssh then refused the host), and kept by cert, which added a line
// naming the host in the clear, a name the file had hashed away.
func knownHostNamed(name, host string) (hashed, ok bool) {
	if name == host {
		return false, true
	}
	if !strings.HasPrefix(name, "|1|") {
		return false, false
	}
	// ssh looks a host up by its name lower-cased, as it hashes it.
	return true, hashedNameOf(name, host) || hashedNameOf(name, strings.ToLower(host))
}

// hashedNameOf reports whether the hashed known_hosts name field is
// host's hash.
func hashedNameOf(field, host string) bool {
	rest, ok := strings.CutPrefix(field, "|1|")
	if !ok {
		return false
	}
	salt64, sum64, ok := strings.Cut(rest, "|")
	if !ok {
		return false
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		return false
	}
	sum, err := base64.StdEncoding.DecodeString(sum64)
	return err == nil && hmac.Equal(sum, hashHostName(salt, host))
}

// hashHostName is host's hash under salt, as a hashed known_hosts line
// holds it (knownHostNamed).
func hashHostName(salt []byte, host string) []byte {
	m := hmac.New(sha1.New, salt)
	m.Write([]byte(host))
	return m.Sum(nil)
}

// hashedHostField is a new hashed known_hosts name for host: a fresh
// salt, as ssh makes one for each line, and host lower-cased, as ssh
// looks it up.
func hashedHostField(host string) (string, error) {
	salt := make([]byte, sha1.Size)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	enc := base64.StdEncoding.EncodeToString
	return "|1|" + enc(salt) + "|" + enc(hashHostName(salt, strings.ToLower(host))), nil
}

// knownHostLine reads what the known_hosts file at path says of host:
// named, whether a line names it; current, whether its one line gives
// hostKey ("type base64"), so pinKnownHost would change nothing. `gateway
// cert` and `gateway proxy` rewrite the file only when it is not current:
// a file rewritten on every run would be replaced under an ssh reading it.
func knownHostLine(path, host, hostKey string) (named, current bool, err error) {
	keys, err := knownHostKeys(path, host)
	if err != nil {
		return false, false, err
	}
	if k, err := knownHostKey(hostKey); err == nil {
		hostKey = k // as pinKnownHost writes it: a comment after the key is not written
	}
	return len(keys) > 0, len(keys) == 1 && keys[0] == strings.TrimSpace(hostKey), nil
}

// knownHostKey is hostKey, which the gateway sent in authorized_keys
// form, as a known_hosts line holds it ("type base64"), or an error when
// it is not one public key. Written as it came, a key holding a newline
// put lines of the gateway's choosing into the user's known_hosts, for
// any host ("* ssh-ed25519 …").
func knownHostKey(hostKey string) (string, error) {
	pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err == nil && len(bytes.TrimSpace(rest)) > 0 {
		err = errors.New("more than one line")
	}
	if err != nil {
		return "", fmt.Errorf("the gateway's host key %q is not one public key in authorized_keys form (%v); the known_hosts file is left as it was: check the gateway: GET /v1/hosts/ID answers the key it pins (hostPublicKey)", textcut.Cut(hostKey, 120), err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), nil
}

// pinKnownHost makes hostKey the one line for host in the known_hosts file
// at path, keeping the other lines, those another run pins meanwhile too.
func pinKnownHost(path, host, hostKey string) error {
	if hostKey == "" {
		return fmt.Errorf("the gateway has no host key for %s yet", host)
	}
	hostKey, err := knownHostKey(hostKey)
	if err != nil {
		return err
	}
	if path, err = followLinks(path); err != nil {
		return err
	}
	unlock, err := lockKnownHosts(path)
	if err != nil {
		return err
	}
	defer unlock()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var out strings.Builder
	name := host
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 1 {
			if hashed, ok := knownHostNamed(f[0], host); ok {
				// A file that hid host's name keeps it hidden: under
				// the line's own hash where it is the one ssh looks up
				// (so a pin again writes the same file), else anew.
				if hashed && name == host {
					name = f[0]
					if !hashedNameOf(name, strings.ToLower(host)) {
						if name, err = hashedHostField(host); err != nil {
							return err
						}
					}
				}
				continue
			}
		}
		out.WriteString(strings.TrimRight(line, "\n") + "\n")
	}
	out.WriteString(name + " " + hostKey + "\n")
	// The file's own mode, where it has one: a file others read (a
	// team's, 0644) made 0600 failed their ssh's host key check.
	perm := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	return writeAtomic(path, []byte(out.String()), perm)
}

// writeNew makes path with data, whole, as writeAtomic does, unless
// path exists: then it leaves it and returns an error matching
// fs.ErrExist.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	return durable.Link(f.Name(), path)
}

// followLinks is the file the symlink at path leads to, made or not yet,
// or path when it is no symlink: a rewrite renamed over a link (a
// known_hosts file kept in a dotfiles repository and linked into ~/.ssh)
// replaced the link, and the file it led to never saw the change.
func followLinks(path string) (string, error) {
	for range 40 { // Linux's own bound on a chain of links (ELOOP)
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		to, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(path), to)
		}
		path = to
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links: point it at the file itself", path)
}

// writeAtomic replaces path with data: an ssh starting meanwhile reads the
// old file or the new one, never half of one, and after a power loss
// too (the file synced before its rename, its directory after).
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = durable.Rename(f.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
	}
	return werr
}
