// Package hostgate is the Host API: one [Host] per machine or sandbox, with the
// same methods whatever carries it.
//
// A Host is lazy: [New] takes the host's [Info] and a connect function that runs
// once, on first use, and returns a [Connection]. The connection supplies a
// [Transport] (required) that spawns processes, and optionally a filesystem
// [Provider] (default: [ExecProvider] over the transport), a [Forwarder] for
// port forwarding and a [SyncSpec] for the synchronous filesystem bridge
// (package syncfs). [Wrap] runs every process of a host through a wrapper such
// as an OS sandbox.
//
// This package defines interfaces and the pieces that need nothing but a
// transport; the SSH layer (package sshlayer), the gateway client and the
// Docker execution host implement them.
package hostgate
