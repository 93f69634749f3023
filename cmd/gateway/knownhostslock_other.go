//go:build !unix

package main

// lockKnownHosts does nothing where flock(2) is missing: concurrent
// rewrites of one known_hosts file may each keep only their own line.
func lockKnownHosts(string) (func(), error) { return func() {}, nil }
