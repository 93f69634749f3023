// Package sshlayer is SSH over any byte stream: the client every caller uses
// to reach a host (Connect with a pinned host key, keepalives, Spawn, the
// SFTP provider, forwarding both ways, GenerateSessionKey) and the embedded
// server the agent runs.
//
// The client never trusts a host it cannot name: Auth.HostKey pins the host
// key, by fingerprint ("SHA256:…", as ssh-keygen -lf prints it; ed25519 for
// a host with several keys) or as the public key itself, and is checked
// during key exchange, before any user-authentication request is sent, so a
// server with another key never sees the caller's key or certificate.
// Skipping the check is spelled InsecureSkipHostKeyCheck, for streams that
// are already authenticated end to end.
//
// Its SSH and SFTP types are those of hostgate's copies of x/crypto/ssh and
// pkg/sftp, packages of this module that the copies' HOSTGATE.md files
// describe: [Auth].Signer, [ServerConfig].HostKey and AuthorizedKeys,
// [LoadOrCreateHostKey], [Fingerprint] and [Client.SSH] are of
// github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh, and
// [NewSFTPProvider] takes a client of
// github.com/hostgate/hostgate/third_party/github.com/pkg/sftp. A caller
// that passes keys imports that ssh package, not golang.org/x/crypto/ssh,
// whose Signer and PublicKey are other types; a stock key crosses over as
// its wire form (the copy's ssh.ParsePublicKey(key.Marshal())) or, for a
// signer, as the crypto.Signer behind it (the copy's ssh.NewSignerFromKey).
//
// A Client turns into a hostgate.Connection with [Client.Connection]: exec
// over SSH sessions (each remote command is one "cd; export; exec" shell
// line), the filesystem over SFTP, forwarding over direct-tcpip and
// tcpip-forward, and a synchronous-filesystem spec that dials a second,
// separate connection ([SyncSpec]).
//
// The server announces itself as "SSH-2.0-OpenSSH.hostgate
// early-data@hostgate early-requests@hostgate sftp-errno@hostgate"
// ("OpenSSH" for OpenSSH's ssh: see serverVersion): it takes early data, a
// forwarded connection's first bytes sent behind the channel open before
// its answer (x/crypto fork, HOSTGATE.md change 5), and [Client.DialEarly]
// sends them only to a server that says so; it takes a session's
// requests before its answer too (change 26), so that a command on a
// channel of its own sends its open and its exec at once; and its SFTP
// server says "no such file" only for
// ENOENT where the provider would look up which errno it was (ENOTDIR
// and ELOOP are said in words, SFTP v3 having no status for them), so the
// provider looks nothing up after it.
package sshlayer
