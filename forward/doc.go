// Package forward runs port forwards over a host and serves the HTTP preview
// proxy.
//
// Run starts one forward (Spec) against anything that can dial and listen on
// a host — a *hostgate.Host or a hostgate.Forwarder:
//
//   - local (ssh -L): listen on the caller's side, dial Connect on the host;
//   - remote (ssh -R): listen on the host, dial Connect on the caller's side;
//   - dynamic (ssh -D): a SOCKS5 server (RFC 1928, CONNECT only, no
//     authentication) on the caller's side; each CONNECT is dialed on the
//     host.
//
// Every forward keeps its own counters and is released — listener, every
// connection, every goroutine — when its ctx ends, when Close is called, or
// when the host connection ends.
//
// Preview is an http.Handler that proxies HTTP/1.1 (including server-sent
// events and WebSocket upgrades) to a port on a host, in the subdomain form
// http://{port}--{host}.{domain}/… and the path form /preview/{host}/{port}/….
// See PreviewConfig for the cookie and authorization contract with the
// gateway.
package forward
