// Package sigreset owns one process-wide setting: the commands a process
// starts get the default disposition of the signals the process itself
// was started ignoring.
package sigreset
