package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hostgate/hostgate/bench"
)

// forwardKept is forward's load on connections that stay open, as a
// browser keeps its few to a dev server and asks for the page's modules
// one after another on each: what a preview costs per request once its
// channels are open, where forward pays a channel per request. The target
// keeps its connections alive; each side's clients open one connection
// apiece, which carries all their requests.
func (e *env) forwardKept(ctx context.Context) ([]*bench.Scenario, error) {
	rig, err := e.startForwards(ctx, true)
	if err != nil {
		return nil, err
	}
	defer rig.Close()
	web, fw, directFw := rig.web, rig.relay, rig.direct
	target := web.addr()
	peerAddr, err := e.sshd.forwardL(ctx, target)
	if err != nil {
		return nil, err
	}
	previewURL := web.previewURL(e.gw, benchHostID)
	// The SSH layer alone and the same through the splice relay, as in
	// forward: with a message each way per request and no channel to open,
	// they say what a relay's hop costs per message, and how near the
	// gateway's is to that floor.
	floor, err := e.startRelayFloor(ctx, target)
	if err != nil {
		return nil, err
	}
	defer floor.Close()
	alone, aloneFw, relayFw := floor.alone, floor.aloneFw, floor.relayFw

	workers, n := e.cfg.fwdWorkers, e.cfg.keptN
	// One transport per side for the whole scenario, its connections
	// opened by an untimed load first: the rows are the requests alone (a
	// new connection per request is forward's row).
	type side struct {
		url, token string
		tr         *http.Transport
	}
	newSide := func(url, token string) *side {
		return &side{url: url, token: token, tr: &http.Transport{MaxConnsPerHost: workers, MaxIdleConnsPerHost: workers}}
	}
	ours, direct, preview, theirs := newSide("http://"+fw.Addr().String()+"/", ""), newSide("http://"+directFw.Addr().String()+"/", ""),
		newSide(previewURL, e.gw.admin), newSide("http://"+peerAddr+"/", "")
	load := func(s *side) (float64, []float64, error) { return httpLoadOn(ctx, s.tr, s.url, s.token, n, workers) }
	sshAlone, spliced := newSide("http://"+aloneFw.Addr().String()+"/", ""), newSide("http://"+relayFw.Addr().String()+"/", "")
	all := []*side{ours, direct, preview, theirs, sshAlone, spliced}
	// With -gateway-before, the same preview through the build before's
	// gateway to its host: the A/B rows.
	var before *side
	var abRow, abCPU *bench.Scenario
	if e.gwBefore != nil {
		before = newSide(web.previewURL(e.gwBefore, "before"), e.gwBefore.admin)
		all = append(all, before)
	}
	for _, s := range all {
		defer s.tr.CloseIdleConnections()
		if _, _, err := httpLoadOn(ctx, s.tr, s.url, s.token, 4*workers, workers); err != nil {
			return nil, fmt.Errorf("opening the connections of %s: %w", s.url, err)
		}
	}

	const peer = "ssh -L (ControlMaster)"
	const base = "local forward, small HTTP requests on kept-alive connections"
	rps := &bench.Scenario{Name: base, Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: fmt.Sprintf("%d requests per side per pair on %d connections that stay open (the target keeps them alive), one request at a time on each: a browser's few connections to a dev server; Host.Forward through the gateway", n, workers)}
	rpsCPU := newCPURow(rps, "request")
	rpsCPU.peerShares = true
	p99 := &bench.Scenario{Name: base + ", p99", Unit: "ms", PeerName: peer, Better: bench.Lower}
	directRPS := &bench.Scenario{Name: base + ", direct session", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load through Host.Forward over a direct session, the gateway off the path"}
	directCPU := newCPURow(directRPS, "request")
	directCPU.peerShares = true
	previewRPS := &bench.Scenario{Name: base + ", through the gateway's HTTP preview", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load as GET /preview/{host}/{port}/ on the gateway with the admin token, the callers' connections to the gateway kept alive, and the gateway's to the target (a direct-tcpip channel each) pooled: a browser on a dev server's preview"}
	previewCPU := newCPURow(previewRPS, "request")
	previewCPU.peerShares = true
	previewP99 := &bench.Scenario{Name: base + ", through the gateway's HTTP preview, p99", Unit: "ms", PeerName: peer, Better: bench.Lower}
	aloneRPS := &bench.Scenario{Name: base + ", SSH layer alone", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the same load through Host.Forward over the Go client straight to `agent serve --listen` over loopback TCP: no WebSocket, gateway or yamux"}
	aloneCPU := newCPURow(aloneRPS, "request")
	aloneCPU.alone, aloneCPU.peerShares = true, true
	relayRPS := &bench.Scenario{Name: base + ", SSH layer alone through a splice relay", Unit: "req/s", PeerName: peer, Better: bench.Higher,
		Note: "the SSH layer alone's load through a relay process that moves raw bytes with splice(2) and nothing else: the floor of any gateway's relay"}
	relayCPU := newCPURow(relayRPS, "request")
	relayCPU.alone, relayCPU.peerShares = true, true

	if before != nil {
		abRow = e.abScenario(previewRPS.Name, "req/s", bench.Higher)
		abCPU = e.abScenario(previewRPS.Name+", the gateway process's CPU time per request", "ms", bench.Lower)
		abCPU.Note = "the gateway process's own CPU time (user and system) per request, this build's against the build before's, each preview to its own gateway's host"
	}
	for i := range e.cfg.pairs {
		var (
			ar, dr, pr, br, bb, sr, rr float64
			al, pl, bl                 []float64
			ua, ud, up, ub, us, ur     cpuUse
			gwb                        time.Duration // the before gateway's
		)
		sides := []func() error{e.metered(&ua, true, func() (err error) {
			if ar, al, err = load(ours); err != nil {
				return fmt.Errorf("hostgate: %w", err)
			}
			return nil
		}), e.metered(&ud, true, func() (err error) {
			if dr, _, err = load(direct); err != nil {
				return fmt.Errorf("hostgate over a direct session: %w", err)
			}
			return nil
		}), e.metered(&up, true, func() (err error) {
			if pr, pl, err = load(preview); err != nil {
				return fmt.Errorf("hostgate preview: %w", err)
			}
			return nil
		}), e.metered(&ub, false, func() (err error) {
			if br, bl, err = load(theirs); err != nil {
				return fmt.Errorf("ssh -L: %w", err)
			}
			return nil
		}), e.meteredAlone(&us, alone.pid, func() (err error) {
			if sr, _, err = load(sshAlone); err != nil {
				return fmt.Errorf("hostgate over the SSH layer alone: %w", err)
			}
			return nil
		}), e.meteredAlone(&ur, alone.pid, func() (err error) {
			if rr, _, err = load(spliced); err != nil {
				return fmt.Errorf("hostgate through the splice relay: %w", err)
			}
			return nil
		})}
		if before != nil {
			sides = append(sides, func() error {
				c0, err := bench.ProcessCPU(e.gwBefore.Pid())
				if err != nil {
					return err
				}
				if bb, _, err = load(before); err != nil {
					return fmt.Errorf("preview through the gateway before: %w", err)
				}
				c1, err := bench.ProcessCPU(e.gwBefore.Pid())
				gwb = c1 - c0
				return err
			})
		}
		if err := bench.Alternate(i, sides...); err != nil {
			return nil, err
		}
		rps.Add(ar, br)
		rpsCPU.add(ua, ub, float64(n))
		p99.Add(bench.Percentile(al, 99), bench.Percentile(bl, 99))
		directRPS.Add(dr, br)
		directCPU.add(ud, ub, float64(n))
		previewRPS.Add(pr, br)
		previewCPU.add(up, ub, float64(n))
		previewP99.Add(bench.Percentile(pl, 99), bench.Percentile(bl, 99))
		aloneRPS.Add(sr, br)
		aloneCPU.add(us, ub, float64(n))
		relayRPS.Add(rr, br)
		relayCPU.add(ur, ub, float64(n))
		if before != nil {
			abRow.Add(pr, bb)
			perReq := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
			abCPU.Add(perReq(up.gateway), perReq(gwb))
		}
	}
	out := []*bench.Scenario{rps, rpsCPU.scenario(), p99, directRPS, directCPU.scenario(), previewRPS, previewCPU.scenario(), previewP99, aloneRPS, aloneCPU.scenario(), relayRPS, relayCPU.scenario()}
	if before != nil {
		out = append(out, abRow, abCPU)
	}
	return out, nil
}
