package cpulimit

import (
	"testing"
	"testing/fstest"
)

func TestReadFrom(t *testing.T) {
	const dockerV1 = `9:name=systemd:/docker/c197
4:memory:/docker/c197
2:cpuacct:/docker/c197
1:cpu:/docker/c197
0::/docker/c197
`
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		want float64 // 0: none
	}{
		{"v2 container, one CPU", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("100000 100000\n"),
		}, 1},
		{"v2 container, no limit", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("max 100000\n"),
		}, 0},
		{"v2 host, a service held to half a CPU", fstest.MapFS{
			"proc/self/cgroup": file("0::/system.slice/agent.service\n"),
			"sys/fs/cgroup/system.slice/agent.service/cpu.max": file("50000 100000\n"),
			"sys/fs/cgroup/cpu.max":                            file("max 100000\n"),
		}, 0.5},
		{"v2 host root, no file", fstest.MapFS{
			"proc/self/cgroup": file("0::/\n"),
		}, 0},
		{"v1 docker (host cgroup namespace): the mount is the container's", fstest.MapFS{
			"proc/self/cgroup":                    file(dockerV1),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("100000\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 1},
		{"v1 docker, two CPUs", fstest.MapFS{
			"proc/self/cgroup":                    file(dockerV1),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("200000\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 2},
		{"v1 no quota", fstest.MapFS{
			"proc/self/cgroup":                    file(dockerV1),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("-1\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 0},
		{"v1 host, a cgroup's own files under cpu,cpuacct", fstest.MapFS{
			"proc/self/cgroup": file("3:cpu,cpuacct:/batch\n"),
			"sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us":  file("25000\n"),
			"sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us": file("100000\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":        file("-1\n"),
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us":       file("100000\n"),
		}, 0.25},
		{"no /proc", fstest.MapFS{}, 0},
		{"garbage", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("lots\n"),
		}, 0},
		{"a path that would climb out stays under the mount", fstest.MapFS{
			"proc/self/cgroup":      file("0::/../../etc\n"),
			"sys/fs/cgroup/cpu.max": file("100000 100000\n"),
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := readFrom(tc.fsys)
			if ok != (tc.want != 0) || got != tc.want {
				t.Fatalf("readFrom = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("0::/\n1:cpu:/docker/x\n"), []byte("100000 100000"), []byte("-1"))
	f.Add([]byte("3:cpu,cpuacct:/a/../b\n"), []byte("max 100000"), []byte("25000"))
	f.Fuzz(func(t *testing.T, cgroup, a, b []byte) {
		v2, v1 := parseCgroup(cgroup)
		for _, p := range []string{v2, v1} {
			if p != "" && (p[0] == '/' || len(p) > len(cgroup)) {
				t.Fatalf("path %q from %q", p, cgroup)
			}
		}
		if cpus, ok := parseCPUMax(a); ok && cpus <= 0 {
			t.Fatalf("parseCPUMax(%q) = %v", a, cpus)
		}
		if cpus, ok := parseV1(a, b); ok && cpus <= 0 {
			t.Fatalf("parseV1(%q, %q) = %v", a, b, cpus)
		}
	})
}
