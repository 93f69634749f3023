//go:build !unix

package bytestream

import "errors"

// rawReads is false where a descriptor cannot be read with read(2)
// (Windows): readAhead then reads through the conn.
const rawReads = false

func readFD(uintptr, []byte) (int, bool, error) {
	return 0, false, errors.New("bytestream: raw reads are not supported here")
}
