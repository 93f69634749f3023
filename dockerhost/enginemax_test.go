package dockerhost

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/system"
)

// infoDocker is fakeDocker with the engine's Info, which the real client
// has.
type infoDocker struct {
	*fakeDocker
	info  system.Info
	err   error
	calls int
}

func (d *infoDocker) Info(context.Context) (system.Info, error) {
	d.calls++
	return d.info, d.err
}

// syncBuffer is a bytes.Buffer a logger may write from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// engineMaxHost is a host on cli whose log is returned.
func engineMaxHost(t *testing.T, cli DockerAPI, cfg *Config) (*Docker, *syncBuffer) {
	t.Helper()
	cfg.Owner, cfg.CheckpointDir = "gw", t.TempDir()
	var log syncBuffer
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.NewTextHandler(&log, nil)), cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h, &log
}

// operatorMax is an operator's Config.MaxResources.
func operatorMax() *Resources {
	return &Resources{CPUs: 3, MemoryBytes: 1 << 40, DiskBytes: 1 << 30, Pids: 64, RuntimeMs: 60_000, MaxOutputBytes: 1 << 20}
}

// TestMaxCPUsTheEngines: a request's CPUs are bounded by what the engine
// has, not by the gateway's own count, so a request the engine would
// refuse at create is refused at validation, naming resources.cpus; where
// the engine does not say, or the operator set MaxResources, nothing
// changes.
func TestMaxCPUsTheEngines(t *testing.T) {
	ours := float64(runtime.NumCPU())
	for _, tc := range []struct {
		name string
		cli  DockerAPI
		cfg  Config
		want float64
	}{
		{"the engine has fewer", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 1}}, Config{}, 1},
		{"the engine has more", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 96}}, Config{}, 96},
		{"the engine does not say", &infoDocker{fakeDocker: &fakeDocker{}, err: errors.New("boom")}, Config{}, ours},
		{"no Info", &fakeDocker{}, Config{}, ours},
		{"the operator's maximum", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 1}}, Config{MaxResources: operatorMax()}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := engineMaxHost(t, tc.cli, &tc.cfg)
			if got := h.policy.Max.CPUs; got != tc.want {
				t.Errorf("Max.CPUs %v, want %v", got, tc.want)
			}
		})
	}
	h, _ := engineMaxHost(t, &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 1}}, &Config{})
	req := validReq()
	req.Resources.CPUs = 1.5
	var e *Error
	if err := h.policy.ValidateProvision(&req); !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "resources.cpus" || !strings.Contains(e.Message, "the Docker engine has 1 CPUs: ask for at most 1") {
		t.Errorf("1.5 CPUs on an engine of 1: %v; want invalid_request on resources.cpus, naming the engine's count", err)
	}
}

// TestMaxMemoryTheEngines: a request's memory is bounded by default by
// what the engine has in all (Info's MemTotal, read once at start): the
// engine takes a limit past it, which is no limit, and the workspace's
// tmpfs, sized from memoryBytes, could take the machine's memory. Such a
// request is refused at validation naming resources.memoryBytes, the
// maximum and why; the engine's total itself is allowed. An engine with
// more than the default maximum leaves it; an operator's MaxResources is
// kept as set; an engine that does not answer leaves the default, with a
// warning.
func TestMaxMemoryTheEngines(t *testing.T) {
	const engineMem int64 = 3 << 30
	def := DefaultMaxResources().MemoryBytes
	for _, tc := range []struct {
		name string
		cli  DockerAPI
		cfg  Config
		want int64
		warn bool
	}{
		{"the engine has less", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 2, MemTotal: engineMem}}, Config{}, engineMem, false},
		{"the engine has more", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 2, MemTotal: 4 * def}}, Config{}, def, false},
		{"the engine does not answer", &infoDocker{fakeDocker: &fakeDocker{}, err: errors.New("boom")}, Config{}, def, true},
		{"the engine does not say", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 2}}, Config{}, def, true},
		{"no Info", &fakeDocker{}, Config{}, def, false},
		{"the operator's maximum", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 2, MemTotal: engineMem}}, Config{MaxResources: operatorMax()}, 1 << 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, log := engineMaxHost(t, tc.cli, &tc.cfg)
			if got := h.policy.Max.MemoryBytes; got != tc.want {
				t.Errorf("Max.MemoryBytes %v, want %v", got, tc.want)
			}
			if warned := strings.Contains(log.String(), "level=WARN msg=\"the Docker engine did not say how much memory"); warned != tc.warn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tc.warn, log)
			}
		})
	}
	h, _ := engineMaxHost(t, &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 2, MemTotal: engineMem}}, &Config{})
	req := validReq()
	req.Resources.MemoryBytes = engineMem
	if err := h.policy.ValidateProvision(&req); err != nil {
		t.Errorf("the engine's whole memory: %v, want it allowed", err)
	}
	req.Resources.MemoryBytes = engineMem + 1
	var e *Error
	if err := h.policy.ValidateProvision(&req); !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "resources.memoryBytes" ||
		!strings.Contains(e.Message, "and "+strconv.FormatInt(engineMem, 10)+"; the Docker engine has "+strconv.FormatInt(engineMem, 10)+" bytes of memory in all, and a limit past that is no limit: ask for at most "+strconv.FormatInt(engineMem, 10)) {
		t.Errorf("a byte past the engine's memory: %v; want invalid_request on resources.memoryBytes naming the maximum, why and the fix", err)
	}
}
