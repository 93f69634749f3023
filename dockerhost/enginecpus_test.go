package dockerhost

import (
	"context"
	"errors"
	"runtime"
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

// TestMaxCPUsTheEngines: a request's CPUs are bounded by what the engine
// has, not by the gateway's own count, so a request the engine would
// refuse at create is refused at validation, naming resources.cpus; where
// the engine does not say, or the operator set MaxResources, nothing
// changes.
func TestMaxCPUsTheEngines(t *testing.T) {
	host := func(t *testing.T, cli DockerAPI, cfg *Config) *Docker {
		t.Helper()
		cfg.Owner, cfg.CheckpointDir = "gw", t.TempDir()
		h, err := NewDocker(testCtx(t, time.Minute), nil, cli, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
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
		{"the operator's maximum", &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 1}}, Config{MaxResources: &Resources{CPUs: 3, MemoryBytes: 1 << 30, DiskBytes: 1 << 30, Pids: 64, RuntimeMs: 60_000, MaxOutputBytes: 1 << 20}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := host(t, tc.cli, &tc.cfg)
			if got := h.policy.Max.CPUs; got != tc.want {
				t.Errorf("Max.CPUs %v, want %v", got, tc.want)
			}
		})
	}
	h := host(t, &infoDocker{fakeDocker: &fakeDocker{}, info: system.Info{NCPU: 1}}, &Config{})
	req := validReq()
	req.Resources.CPUs = 1.5
	var e *Error
	if err := h.policy.ValidateProvision(&req); !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "resources.cpus" {
		t.Errorf("1.5 CPUs on an engine of 1: %v; want invalid_request on resources.cpus", err)
	}
}
