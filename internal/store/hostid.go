package store

// MaxHostIDLen bounds host ids; they appear in URLs, DNS labels of preview
// domains ("{port}--{host}.domain", a 63-byte label) and certificate
// principals.
const MaxHostIDLen = 48

// ValidHostID reports whether id is a usable host id: 1–48 bytes of
// lower-case letters, digits and single inner hyphens, starting with a
// letter or digit — safe in a URL path, a DNS label and an SSH principal.
func ValidHostID(id string) bool {
	if id == "" || len(id) > MaxHostIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(id)-1 && id[i-1] != '-':
			// "--" is the preview URL separator, so never inside an id.
		default:
			return false
		}
	}
	return true
}
