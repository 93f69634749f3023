//go:build !unix

package sftp

// fdLimit: no descriptor limit to keep under here (Windows' handles run
// to millions).
func fdLimit() int { return 0 }
