//go:build !linux

package gateway

import "errors"

// diskFree is not measured off Linux; the free-space check is skipped.
func diskFree(string) (free, total uint64, err error) { return 0, 0, errors.ErrUnsupported }
