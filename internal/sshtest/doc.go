// Package sshtest starts sshlayer's loopback test server for the tests of
// other packages (on Unix: the server's sessions are Unix processes).
package sshtest
