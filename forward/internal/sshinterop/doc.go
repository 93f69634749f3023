// Package sshinterop holds the tests and benchmarks that run package forward
// over the real SSH client (sshlayer) against OpenSSH's sshd, and compare its
// local forward with OpenSSH's own `ssh -L` to the same server. It has no
// code of its own; it is a separate package so that forward's unit tests
// never depend on sshlayer.
package sshinterop
