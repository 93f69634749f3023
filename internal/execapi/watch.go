package execapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/yamux"
)

// errUnresponsive means an agent left the gateway's ping unanswered: its
// tunnel was closed and a new agent is due.
var errUnresponsive = errors.New("execapi: the agent stopped answering")

// killStoppedTimeout bounds the docker exec that kills a stopped agent.
const killStoppedTimeout = 30 * time.Second

// watch pings r's agent, p, over sess every
// PingTimeout, and at once when a command's channel did not open in time
// (r.probe). It returns nil when
// sess or ctx ends, and an error wrapping errUnresponsive when a ping
// went unanswered for PingTimeout and the agent was found stopped (and
// killed: KillStopped): sess is closed then, and its commands answer
// agent_lost, saying why. An agent slow to answer but not stopped (a
// loaded machine, a sandbox at its CPU quota), or not known to be, keeps
// its tunnel, closing which would cut every command it runs; new
// commands go to docker exec until it answers a ping.
//
// The tunnel's own keepalive would close a stopped agent's tunnel too,
// but only after its 30 s interval and a 30 s wait for the answer:
// meanwhile every command sent to it waited its whole timeoutMs and
// answered timeout, destroying the execution.
func (a *Agents) watch(ctx context.Context, r *run, sess *yamux.Session, p *agentProc, log *slog.Logger) error {
	tick := time.NewTicker(a.cfg.PingTimeout)
	defer tick.Stop()
	for {
		select {
		case <-sess.CloseChan():
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-r.probe:
		}
		t0 := time.Now()
		if answered(ctx, sess, a.cfg.PingTimeout) {
			if r.clearSuspect() {
				log.Info("agent answered the gateway's ping again: commands go through it", "took", time.Since(t0))
			}
			continue
		}
		if sess.IsClosed() || ctx.Err() != nil {
			return nil
		}
		// Until it answers a ping, commands go to docker exec.
		r.setSuspect()
		killed := "not looked at (no KillStopped)"
		verdict := func() {}
		if a.cfg.KillStopped != nil {
			// The kill can take the agent, and end its commands, well
			// before KillStopped reports (a loaded engine): they wait
			// for the verdict below to say why.
			verdict = r.killing()
			n, err := a.killStopped(ctx, r, p, log)
			if err != nil || n == 0 {
				verdict()
			}
			var cerr *dockerhost.StoppedCandidatesError
			switch {
			case errors.As(err, &cerr):
				continue // logged by killStopped
			case err != nil:
				// docker exec fails too where the sandbox holds every
				// pid, when its agent is slow rather than stopped.
				log.Warn("agent slow: no answer to the gateway's ping, and whether it is stopped is unknown; its tunnel is kept, and commands use docker exec until it answers", "pingTimeout", a.cfg.PingTimeout, "err", err)
				continue
			case n == 0:
				log.Warn("agent slow: no answer to the gateway's ping, but not stopped; its tunnel is kept, and commands use docker exec until it answers", "pingTimeout", a.cfg.PingTimeout)
				continue
			}
			killed = fmt.Sprint(n)
		}
		why := fmt.Sprintf("stopped answering (no answer to the gateway's ping within %v: sandbox code stopped it, kill -STOP?), and the gateway replaced it", a.cfg.PingTimeout)
		r.markLost(sess, why)
		verdict()
		_ = sess.Close()
		log.Warn("agent unresponsive: stopped, so its tunnel is closed and a new agent attached", "pingTimeout", a.cfg.PingTimeout, "stoppedKilled", killed)
		return fmt.Errorf("%w: no answer to a ping within %v", errUnresponsive, a.cfg.PingTimeout)
	}
}

// killStopped kills r's agent if it is stopped (KillStopped, which must
// be set), found by p's pid. Where the pid is unknown KillStopped kills the
// one stopped process of the agent's name, and refuses to pick among
// several (sandbox code's would go too): that refusal is logged here, at
// warn the first time for the tunnel, naming the candidates.
func (a *Agents) killStopped(ctx context.Context, r *run, p *agentProc, log *slog.Logger) (int, error) {
	kctx, cancel := context.WithTimeout(ctx, killStoppedTimeout)
	defer cancel()
	n, err := a.cfg.KillStopped(kctx, r.id, filepath.Base(a.cfg.Argv[0]), p.pid(kctx, log))
	var cerr *dockerhost.StoppedCandidatesError
	if errors.As(err, &cerr) {
		level := slog.LevelDebug
		if !p.refused {
			p.refused, level = true, slog.LevelWarn
		}
		log.Log(ctx, level, "agent silent, and which stopped process of its name is the agent is unknown (it reported no pid: an older agent, or stopped before it did; and the gateway cannot map it): none killed, its tunnel is kept, and commands use docker exec until it answers",
			"candidates", cerr.PIDs, "count", cerr.Count, "name", cerr.Name)
	}
	return n, err
}

// pidMapper is an attachment that maps its command's pid in the engine's
// pid namespace to the container's.
type pidMapper interface {
	PID(context.Context) (int, error)
}

var _ pidMapper = (*dockerhost.Stdio)(nil)

// agentProc finds an attached agent's pid in its container for
// KillStopped; owned by its tunnel's loop.
type agentProc struct {
	acks  agent.StdioAcks
	stdio Stdio
	// mapped is the pid the attachment mapped, once it did.
	mapped int
	// refused is set once KillStopped refused to pick among candidates.
	refused bool
}

// pid is the pid the agent reported, else the one its attachment maps
// from the engine's (dockerhost.Stdio.PID: where the gateway sees the
// engine's processes), else 0.
func (p *agentProc) pid(ctx context.Context, log *slog.Logger) int {
	if pid := p.acks.PID(); pid != 0 {
		return pid
	}
	if p.mapped != 0 {
		return p.mapped
	}
	m, ok := p.stdio.(pidMapper)
	if !ok {
		return 0
	}
	pid, err := m.PID(ctx)
	if err != nil {
		log.Debug("the agent reported no pid, and its attachment does not map it", "err", err)
		return 0
	}
	p.mapped = pid
	return pid
}

// answered reports whether the peer of sess answers a ping within d; it
// returns false at once when sess or ctx ends. The ping gives up with it:
// yamux's Ping has no bound of its own on the tunnel (bytestream turns
// its write timeout off), and the tunnel's keepalive ends it only while
// nothing at all arrives, so an agent that keeps sending and answers no
// ping held each tick's ping until the tunnel ended.
func answered(ctx context.Context, sess *yamux.Session, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := sess.PingContext(ctx)
	return err == nil
}

// suspectAgent records that a command's channel did not open in time and
// asks the watch to ping the agent now; until it answers, Runner sends
// commands to docker exec.
func (r *run) suspectAgent() {
	r.setSuspect()
	select {
	case r.probe <- struct{}{}:
	default:
	}
}

// setSuspect sends commands to docker exec until clearSuspect.
func (r *run) setSuspect() {
	r.mu.Lock()
	r.suspect = true
	r.mu.Unlock()
}

// clearSuspect ends the suspicion; it reports whether there was one.
func (r *run) clearSuspect() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.suspect
	r.suspect = false
	return was
}

// killing marks a KillStopped under way, until the returned func is
// called (once its verdict, if any, is marked: markLost).
func (r *run) killing() func() {
	done := make(chan struct{})
	r.mu.Lock()
	r.kill = done
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.kill == done {
			r.kill = nil
		}
		r.mu.Unlock()
		close(done)
	}
}

// killVerdict is closed once the KillStopped under way, if any, has its
// verdict; nil when none is.
func (r *run) killVerdict() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kill
}

// markLost records why sess is closed, for the commands it loses.
func (r *run) markLost(sess *yamux.Session, why string) {
	r.mu.Lock()
	r.lostSess, r.lostWhy = sess, why
	r.mu.Unlock()
}

// lostReason is why sess was closed by the gateway, or "" when it ended
// otherwise (the agent died).
func (r *run) lostReason(sess *yamux.Session) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lostSess != sess {
		return ""
	}
	return r.lostWhy
}
