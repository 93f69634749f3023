//go:build !linux

package store

import "errors"

// dirFree is not measured off Linux: a refused write keeps SQLite's class.
var dirFree = func(string) (uint64, error) { return 0, errors.ErrUnsupported }
