package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag of a size in bytes: a whole number with an optional
// unit K, M, G or T (powers of 1024, also written KiB, MiB, GiB, TiB).
type byteSize int64

var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40}, {"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}, {"b", 0}}

// String writes the size with the largest unit that holds it exactly
// (256M, not 268435456), as --help shows defaults.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	v := strings.ToLower(strings.TrimSpace(s))
	var shift uint
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, shift = strings.TrimSpace(n), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a whole number of bytes, optionally with K, M, G or T (powers of 1024), such as 20G")
	}
	if n > math.MaxInt64>>shift {
		return fmt.Errorf("%s is too large", s)
	}
	*b = byteSize(n << shift)
	return nil
}
