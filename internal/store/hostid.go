package store

// MaxHostIDLen bounds host ids, which appear in URLs and certificate
// principals.
const MaxHostIDLen = 64

// HostIDRule says what ValidHostID accepts, for error messages.
const HostIDRule = "want 1-64 ASCII letters, digits, '_', '.' and '-', starting with a letter or digit"

// ValidHostID reports whether id is a usable host id: 1–64 bytes of ASCII
// letters, digits, '_', '.' and '-', starting with a letter or digit — the
// same shape as Docker execution ids (an execution is also a host), safe in
// a URL path segment, a file name and an SSH principal.
func ValidHostID(id string) bool {
	if id == "" || len(id) > MaxHostIDLen || !alnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !alnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
