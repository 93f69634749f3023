// Package cpulimit reads the CPU bandwidth limit of the cgroup this process
// runs in (cgroup v2's cpu.max, v1's cpu.cfs_quota_us over
// cpu.cfs_period_us), so that a program held to one CPU can size its Go
// runtime to it: the runtime's own default (Go 1.25 on) rounds a limit
// below two CPUs up to two.
package cpulimit

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// Read is the limit, in CPUs, of the cgroup this process runs in; ok is
// false when it has none or it cannot be read.
func Read() (cpus float64, ok bool) { return readFrom(os.DirFS("/")) }

// readFrom is Read over fsys, the root of a filesystem (proc/self/cgroup,
// sys/fs/cgroup/...).
//
// The cgroup's files are looked for under its path in /proc/self/cgroup
// (a host, where the hierarchy's root is mounted) and then at the
// controller's mount itself (a container, where the container's own cgroup
// is what is mounted there, whatever path /proc/self/cgroup names).
func readFrom(fsys fs.FS) (float64, bool) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	v2, v1 := parseCgroup(b)
	if v2 != "" {
		for _, dir := range []string{path.Join("sys/fs/cgroup", v2), "sys/fs/cgroup"} {
			if b, err := fs.ReadFile(fsys, path.Join(dir, "cpu.max")); err == nil {
				return parseCPUMax(b)
			}
		}
	}
	if v1 != "" {
		for _, mount := range []string{"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct", "sys/fs/cgroup/cpuacct,cpu"} {
			for _, dir := range []string{path.Join(mount, v1), mount} {
				quota, qerr := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_quota_us"))
				period, perr := fs.ReadFile(fsys, path.Join(dir, "cpu.cfs_period_us"))
				if qerr == nil && perr == nil {
					return parseV1(quota, period)
				}
			}
		}
	}
	return 0, false
}

// parseCgroup takes /proc/self/cgroup: the path of the v2 hierarchy
// ("0::/path") and of the v1 hierarchy that has the cpu controller, each
// relative ("" where there is none).
func parseCgroup(b []byte) (v2, v1 string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		rel := strings.TrimPrefix(path.Clean(p), "/")
		if rel == "" {
			rel = "."
		}
		if !fs.ValidPath(rel) {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2 = rel
		case inList(controllers, "cpu"):
			v1 = rel
		}
	}
	return v2, v1
}

func inList(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// parseCPUMax takes cgroup v2's cpu.max: "QUOTA PERIOD", QUOTA "max" for
// none.
func parseCPUMax(b []byte) (float64, bool) {
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	return ratio(f[0], f[1])
}

// parseV1 takes cgroup v1's cpu.cfs_quota_us (-1 for none) and
// cpu.cfs_period_us.
func parseV1(quota, period []byte) (float64, bool) {
	return ratio(strings.TrimSpace(string(quota)), strings.TrimSpace(string(period)))
}

func ratio(quota, period string) (float64, bool) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}
