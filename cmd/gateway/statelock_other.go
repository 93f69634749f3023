//go:build !unix

package main

// lockStateDir is a no-op where flock(2) is missing.
func lockStateDir(string) (func(), error) { return func() {}, nil }

// stateDirServed cannot tell without flock(2): no.
func stateDirServed(string) bool { return false }
