package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Conntrack reads the kernel's connection-tracking table: entries in use and
// the table's size. ok is false where netfilter's conntrack is not loaded.
// A benchmark that opens thousands of short connections fills it on a busy
// machine (each closed connection stays 120 s in TIME_WAIT there); a full
// table drops new connections' packets, and a run stalls for seconds.
func Conntrack() (count, limit int, ok bool, err error) {
	read := func(name string) (int, error) {
		b, err := os.ReadFile("/proc/sys/net/netfilter/" + name)
		if err != nil {
			return 0, err
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %v", ErrProcFormat, name, err)
		}
		return v, nil
	}
	limit, err = read("nf_conntrack_max")
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	if count, err = read("nf_conntrack_count"); err != nil {
		return 0, 0, false, err
	}
	return count, limit, true, nil
}
