package hostgate

// Info describes a host.
type Info struct {
	Kind      string `json:"kind"`      // "machine", "docker", "local", …
	OS        string `json:"os"`        // uname -s, lower case: "linux", "darwin"
	Home      string `json:"home"`      // the user's home directory
	TempDir   string `json:"tempDir"`   // a directory for temporary files
	Workspace string `json:"workspace"` // where work happens; may equal Home
	// Persistent hosts outlive a session, so abandoned processes must not
	// linger: Spawn runs them under a watchdog unless the transport owns
	// supervision.
	Persistent bool `json:"persistent"`
}
