//go:build !unix

package durable

// syncDir does nothing where a directory cannot be synced: Windows opens
// one only for reading, and FlushFileBuffers on such a handle fails
// (access denied); NTFS journals the rename itself.
func syncDir(string) error { return nil }
