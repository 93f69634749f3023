//go:build !unix

package main

// keepOwner has no owner to keep where there are no Unix owners.
func keepOwner(dir, out string) error { return nil }
