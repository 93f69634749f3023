package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bench"
)

// bulkAB streams the bulk scenario's bytes to this agent and to the
// -agent-before one, alternating which goes first, and then back out of
// each, through the same gateway and client (or, with -gateway-before,
// through each build's own gateway): the before/after numbers of a change,
// from one run.
func (e *env) bulkAB(ctx context.Context) ([]*bench.Scenario, error) {
	if e.before == nil {
		return nil, nil
	}
	n := int64(e.cfg.bulkMiB) * mib
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	var out []*bench.Scenario
	for _, dir := range []struct {
		name   string
		stream func(context.Context, spawner, int64) (time.Duration, error)
	}{
		{fmt.Sprintf("bulk stream %d MiB", e.cfg.bulkMiB), streamTo},
		{fmt.Sprintf("bulk stream %d MiB from head -c", e.cfg.bulkMiB), streamFrom},
	} {
		s := e.abScenario(dir.name, "MiB/s", bench.Higher)
		for i := range e.cfg.pairs {
			var a, b time.Duration
			err := bench.Alternate(i, func() (err error) {
				if a, err = dir.stream(ctx, e.host, n); err != nil {
					return fmt.Errorf("this %s: %w", e.abWhat, err)
				}
				return nil
			}, func() (err error) {
				if b, err = dir.stream(ctx, e.before, n); err != nil {
					return fmt.Errorf("%s before: %w", e.abWhat, err)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			s.Add(rate(a), rate(b))
		}
		out = append(out, s)
	}
	return out, nil
}

// abScenario is an A/B row: this build or agent against the one before.
func (e *env) abScenario(name, unit string, better bench.Better) *bench.Scenario {
	return &bench.Scenario{Name: name + ", this " + e.abWhat, Unit: unit, PeerName: e.abWhat + " before the change", Better: better}
}

// sftpDownloadAB reads path over SFTP from this host and the before one,
// alternating.
func (e *env) sftpDownloadAB(ctx context.Context, path string, n int64) (*bench.Scenario, error) {
	s := e.abScenario(fmt.Sprintf("SFTP download %d MiB", n/mib), "MiB/s", bench.Higher)
	rate := func(d time.Duration) float64 { return float64(n) / mib / d.Seconds() }
	for i := range e.cfg.pairs {
		var a, b time.Duration
		err := bench.Alternate(i, func() (err error) {
			if a, err = sftpRead(ctx, e.host, path, n); err != nil {
				return fmt.Errorf("this %s: %w", e.abWhat, err)
			}
			return nil
		}, func() (err error) {
			if b, err = sftpRead(ctx, e.before, path, n); err != nil {
				return fmt.Errorf("%s before: %w", e.abWhat, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		s.Add(rate(a), rate(b))
	}
	return s, nil
}

// forwardAB runs the forward load through a local forward of this host
// and of the before one, alternating: requests per second, and the CPU
// time the gateway and the agent used per request. The machine's spread
// hides a few percent in the rate; the two processes' own CPU time shows
// it.
func (e *env) forwardAB(ctx context.Context, target string, workers int) ([]*bench.Scenario, error) {
	s := e.abScenario("local forward, small HTTP requests", "req/s", bench.Higher)
	cpu := e.abScenario("local forward, small HTTP requests, the gateway's and the agent's CPU time per request", "ms", bench.Lower)
	cpu.Note = "the gateway and agent processes' own CPU time (user and system) per request, this build's against the build before's, through the same client"
	perReq := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(e.cfg.fwdN) }
	this := []int{e.gw.Pid(), e.agent.Pid()}
	forward := func(h *hostgate.Host) (*hostgate.Forwarding, error) {
		return h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: target})
	}
	a, err := forward(e.host)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := forward(e.before)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	for i := range e.cfg.pairs {
		var (
			ar, br float64
			ac, bc time.Duration
		)
		err := bench.Alternate(i, func() (err error) {
			c0 := readCPU(this)
			if ar, _, err = httpLoad(ctx, "http://"+a.Addr().String()+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("this %s: %w", e.abWhat, err)
			}
			ac = readCPU(this).since(c0)
			return nil
		}, func() (err error) {
			c0 := readCPU(e.beforePids)
			if br, _, err = httpLoad(ctx, "http://"+b.Addr().String()+"/", e.cfg.fwdN, workers); err != nil {
				return fmt.Errorf("%s before: %w", e.abWhat, err)
			}
			bc = readCPU(e.beforePids).since(c0)
			return nil
		})
		if err != nil {
			return nil, err
		}
		s.Add(ar, br)
		cpu.Add(perReq(ac), perReq(bc))
	}
	return []*bench.Scenario{s, cpu}, nil
}
