package dockerhost

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// newPoolHost is newTestHost with a warm pool.
func newPoolHost(t testing.TB, cli *client.Client, pc PoolConfig) *Docker {
	t.Helper()
	return newTestHost(t, cli, &Config{Pool: &pc})
}

func waitPool(t testing.TB, h *Docker, what string, cond func(PoolStats) bool) PoolStats {
	t.Helper()
	s, err := h.pool.waitFor(testCtx(t, 2*time.Minute), cond)
	if err != nil {
		t.Fatalf("pool never got %s: %v (stats %+v)", what, err, s)
	}
	return s
}

func poolContainers(t testing.TB, cli *client.Client, owner string) []container.Summary {
	t.Helper()
	list, err := cli.ContainerList(testCtx(t, time.Minute), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelOwner+"="+owner), filters.Arg("label", LabelPool))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// testPoolDeadlineFromClaim: a warm container older than runtimeMs still
// runs after its claim (the deadline starts at provision), gets the
// provision env, and then ends at its deadline: the claim's runtime, not
// the one of the key it was made for.
func testPoolDeadlineFromClaim(t *testing.T) {
	cli, img := engine(t)
	r := small()
	r.RuntimeMs = 5000
	req := emptyReq(img, r)
	h := newPoolHost(t, cli, PoolConfig{Size: 1, Keys: []ProvisionRequest{req}})
	waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
	// Age the pooled container past runtimeMs (a wait, not a poll).
	age := time.NewTimer(6 * time.Second)
	<-age.C

	req.Env = map[string]string{"GREETING": "hello", "KEEP": "provision"}
	// Room for the claim and the command below on a loaded machine (CI's
	// -race stage runs this package's engine tests beside e2e's on 2
	// cores, where provisions took 5 s and more): at 10 s, the runtime
	// could run out before the command did.
	const runtime = 30 * time.Second
	req.Resources.RuntimeMs = runtime.Milliseconds()
	req.Resources.MaxOutputBytes = 16 << 10
	start := time.Now()
	ex := provision(t, h, req)
	if s := h.PoolStats(); s.Hits != 1 || s.Misses != 0 {
		t.Fatalf("want a pool hit for other runtime and output limits, stats %+v", s)
	}
	if ex.Resources != req.Resources {
		t.Fatalf("resources %+v, want the claim's %+v", ex.Resources, req.Resources)
	}
	if ex.ExpiresAt.Before(start.Add(runtime - time.Second)) {
		t.Fatalf("expires %v: deadline did not start at provision (%v)", ex.ExpiresAt, start)
	}
	res, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{
		Command: "/bin/sh", Args: []string{"-c", `echo "$GREETING $KEEP"; id -u`},
		Env: map[string]string{"KEEP": "exec"}, TimeoutMs: 60_000,
	})
	if err != nil {
		t.Fatalf("exec after claim of an aged container: %v", err)
	}
	if res.Stdout != "hello exec\n"+uidOf(t, h, ex.ExecutionID)+"\n" {
		t.Fatalf("stdout %q, want provision env, exec env winning, non-root", res.Stdout)
	}
	t.Logf("the claim and a command took %v of the %v runtime", time.Since(start).Round(time.Millisecond), runtime)
	// The in-container deadline written at claim ends it, and not at the
	// key's 5 s: a lower bound, which load can only make later.
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
	if took := time.Since(start); took < runtime-time.Second {
		t.Fatalf("container ended %v after the claim; its runtime was %d ms", took, req.Resources.RuntimeMs)
	}
}

// testPoolLearnRefillNeverReused: an unknown key misses and is learned,
// the pool refills, each provision gets its own container, and a
// terminated one is gone, never handed out again.
func testPoolLearnRefillNeverReused(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{
		Pool:  &PoolConfig{Size: 1},
		Tools: []Tool{{Name: "hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho \"tool $GREETING\"\n")}},
	})
	req := emptyReq(img, small())
	a := provision(t, h, req)
	if s := h.PoolStats(); s.Misses != 1 || s.Hits != 0 {
		t.Fatalf("first provision of an unknown key: stats %+v", s)
	}
	waitPool(t, h, "a refill for the learned key", func(s PoolStats) bool { return s.Ready == 1 })
	req.Env = map[string]string{"GREETING": "hello"}
	b := provision(t, h, req)
	req.Env = nil
	// The tool was installed at fill; a long-lived command (the agent)
	// gets the provision env as execs do.
	st, err := h.AttachStdio(testCtx(t, time.Minute), b.ExecutionID, []string{"/opt/hostgate/hello"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(st)
	_ = st.Close()
	if err != nil || string(out) != "tool hello\n" {
		t.Fatalf("attached tool saw %q, %v", out, err)
	}
	waitPool(t, h, "a second refill", func(s PoolStats) bool { return s.Ready == 1 && s.Fills >= 2 })
	// A git workspace is imported after the claim.
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "v1")
	greq := req
	greq.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: "HEAD"}
	c := provision(t, h, greq)
	if res := sh(t, h, c.ExecutionID, "cat /workspace/a.txt"); res.Stdout != "v1\n" {
		t.Fatalf("git workspace in a pooled container: %q", res.Stdout)
	}
	if s := h.PoolStats(); s.Hits != 2 {
		t.Fatalf("want 2 hits, stats %+v", s)
	}
	if a.ContainerID == b.ContainerID || b.ContainerID == c.ContainerID || a.ContainerID == c.ContainerID {
		t.Fatalf("a container was handed out twice: %s %s %s", a.ContainerID, b.ContainerID, c.ContainerID)
	}
	// Writes in one execution are not seen in another.
	sh(t, h, b.ExecutionID, "echo mine > /workspace/f")
	if res := sh(t, h, c.ExecutionID, "ls -A /workspace"); res.Stdout != "a.txt\n" {
		t.Fatalf("fresh execution sees %q", res.Stdout)
	}
	if err := h.Terminate(testCtx(t, time.Minute), b.ExecutionID); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, cli, b.ContainerID, time.Minute)
	waitPool(t, h, "a refill", func(s PoolStats) bool { return s.Ready == 1 })
	for _, pc := range poolContainers(t, cli, h.owner) {
		if pc.ID == b.ContainerID {
			t.Fatal("terminated container back in the pool")
		}
	}
}

// testPoolAdopt: another host of the same owner (a restarted gateway)
// adopts a claimed pooled container as an execution and reaps the
// unclaimed ones; a claim of a container that died in the pool falls back
// to a fresh create.
func testPoolAdopt(t *testing.T) {
	cli, img := engine(t)
	req := emptyReq(img, small())
	a := newPoolHost(t, cli, PoolConfig{Size: 1, Keys: []ProvisionRequest{req}})
	waitPool(t, a, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
	// Claimed with other runtime and output limits than the key's: the
	// adopting host must learn them from the container, not the template.
	xreq := req
	xreq.Resources.RuntimeMs, xreq.Resources.MaxOutputBytes = 90_000, 8<<10
	// Claimed seconds after its creation: the adopting host must count
	// the execution (and its in-container deadline) from the claim.
	age := time.NewTimer(2 * time.Second)
	<-age.C
	x := provision(t, a, xreq)
	s := waitPool(t, a, "a refill", func(s PoolStats) bool { return s.Ready == 1 })
	if s.Hits != 1 || x.Resources != xreq.Resources {
		t.Fatalf("stats %+v, resources %+v", s, x.Resources)
	}
	warm := poolContainers(t, cli, a.owner)

	b := newTestHost(t, cli, &Config{Owner: a.owner})
	got, err := b.Get(testCtx(t, time.Minute), x.ExecutionID)
	if err != nil {
		t.Fatalf("claimed pooled execution not adopted: %v", err)
	}
	if got.ContainerID != x.ContainerID || got.ExpiresAt.Unix() != x.ExpiresAt.Unix() || got.Resources != x.Resources || got.CreatedAt.Unix() != x.CreatedAt.Unix() {
		t.Fatalf("adopted %+v, provisioned %+v", got, x)
	}
	if res := sh(t, b, x.ExecutionID, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("adopted exec: %q", res.Stdout)
	}
	for _, c := range warm {
		if c.ID != x.ContainerID {
			waitRemoved(t, cli, c.ID, time.Minute)
		}
	}
	if _, err := b.Exec(testCtx(t, time.Minute), x.ExecutionID, ExecRequest{Command: "head", Args: []string{"-c", "8193", "/dev/zero"}, TimeoutMs: 60_000}); ErrorCode(err) != CodeOutputLimit {
		t.Fatalf("one byte over the claim's output limit after adoption: %v, want output_limit", err)
	}
	// a's warm container is gone: the claim falls back to a fresh create.
	y := provision(t, a, req)
	if s := a.PoolStats(); s.Dead != 1 || s.Hits != 2 {
		t.Fatalf("want one dead claim, stats %+v", s)
	}
	if res := sh(t, a, y.ExecutionID, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("fallback exec: %q", res.Stdout)
	}
}

// testPoolTTLAndClose: an unclaimed container is replaced after its TTL,
// and Close leaves no pooled container behind.
func testPoolTTLAndClose(t *testing.T) {
	cli, img := engine(t)
	req := emptyReq(img, small())
	// The test moves the pool's clock past the TTL: with a real 5 s TTL, a
	// loaded machine's fills took longer than that, so each warm container
	// expired before the next was ready and the pool never held 2 (stats
	// Fills 20 Reaps 19 Ready 1 after 2 minutes).
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	h := newTestHost(t, cli, &Config{Now: now, Pool: &PoolConfig{Size: 2, TTL: time.Hour, Keys: []ProvisionRequest{req}}})
	waitPool(t, h, "a full pool", func(s PoolStats) bool { return s.Ready == 2 })
	first := poolContainers(t, cli, h.owner)
	ahead.Store(int64(2 * time.Hour))
	h.pool.wake()
	s := waitPool(t, h, "TTL replacements", func(s PoolStats) bool { return s.Reaps == 2 && s.Ready == 2 })
	if s.Fills != 4 || s.FillErrors != 0 {
		t.Fatalf("want 2 fills and 2 refills, stats %+v", s)
	}
	// The expired ones are gone from the engine, not only from the pool.
	after := poolContainers(t, cli, h.owner)
	if len(first) != 2 || len(after) != 2 {
		t.Fatalf("pooled containers: %d before the TTL, %d after", len(first), len(after))
	}
	for _, c := range after {
		if c.ID == first[0].ID || c.ID == first[1].ID {
			t.Fatalf("container %s still pooled after its TTL", c.ID)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if left := poolContainers(t, cli, h.owner); len(left) != 0 {
		t.Fatalf("pooled containers left after Close: %d", len(left))
	}
	// Each warm container's uid went with it, replaced or removed.
	if n := h.uids.len(); n != 0 {
		t.Fatalf("%d uids still held after Close", n)
	}
	if _, err := h.Provision(testCtx(t, time.Minute), req); err == nil {
		t.Fatal("provision after Close succeeded")
	}
}

func TestClaimedName(t *testing.T) {
	exp := time.Unix(1_900_000_000, 0)
	for _, id := range []string{"a", "run--7", "a-", "x-1.y_2", strings.Repeat("z", 64)} {
		want := claimed{id: id, expires: exp, runtimeMs: 90_000, maxOutputBytes: 1 << 20, claimedAt: time.Unix(1_899_999_000, 0)}
		if got, ok := parseClaimedName("/" + claimedName(want)); !ok || got != want {
			t.Errorf("%q: got %+v %v", id, got, ok)
		}
		// The form before the claim's time was recorded: it comes back
		// zero, and Adopt takes the container's creation.
		limits := "/hostgate-" + id + "--1900000000.90000.1048576"
		want.claimedAt = time.Time{}
		if got, ok := parseClaimedName(limits); !ok || got != want {
			t.Errorf("%q: got %+v %v", limits, got, ok)
		}
		if n := claimedName(want); "/"+n != limits {
			t.Errorf("a claim of unknown time named %q, want %q", n, limits)
		}
		// The form before the limits were recorded: they come back zero.
		old := "/hostgate-" + id + "--1900000000"
		if got, ok := parseClaimedName(old); !ok || got != (claimed{id: id, expires: exp}) {
			t.Errorf("%q: got %+v %v", old, got, ok)
		}
	}
	for _, n := range []string{"/hostgate-pool-0123abcd", "/hostgate-abc", "/other-a--12", "/hostgate---12", "/hostgate-a--",
		"/hostgate-a--x1", "/hostgate-a--12.5", "/hostgate-a--12.0.5", "/hostgate-a--12..5", "/hostgate-a--12.5.6.7.8",
		"/hostgate-a--12.5.6.0", "/hostgate-a--12.5.6.-7", "/hostgate-a--12.5.6.", "/hostgate-a--12.5.6.+7",
		"/hostgate-a--+12", "/hostgate-a--12.-5.6", "/hostgate-a--12.5.99999999999999999999"} {
		if c, ok := parseClaimedName(n); ok {
			t.Errorf("%q parsed as claimed (%+v)", n, c)
		}
	}
}

func FuzzParseClaimedName(f *testing.F) {
	f.Add("/hostgate-abc--1900000000")
	f.Add("/hostgate-abc--1900000000.60000.1024")
	f.Add("/hostgate-abc--1900000000.60000.1024.1899999000")
	f.Add("/hostgate-pool-0011")
	f.Add("hostgate-a--b--3")
	f.Fuzz(func(t *testing.T, name string) {
		c, ok := parseClaimedName(name)
		if !ok {
			return
		}
		if !executionIDRE.MatchString(c.id) || c.expires.Unix() <= 0 || c.runtimeMs < 0 || c.maxOutputBytes < 0 ||
			(c.runtimeMs == 0) != (c.maxOutputBytes == 0) || (!c.claimedAt.IsZero() && (c.claimedAt.Unix() <= 0 || c.runtimeMs == 0)) {
			t.Fatalf("%q parsed as %+v", name, c)
		}
		if c.runtimeMs == 0 { // the older form; the new one always has both
			c.runtimeMs, c.maxOutputBytes = 1, 1
		}
		if c2, ok := parseClaimedName(claimedName(c)); !ok || c2 != c {
			t.Fatalf("round trip of %q: %+v %v", name, c2, ok)
		}
	})
}

// TestAdoptPooled sorts pooled containers on the fake engine: unclaimed
// ones (expired or not) are reaped, never adopted; a claimed one is
// adopted with the deadline and limits from its name, or reaped once past
// it.
func TestAdoptPooled(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec := func(runtimeMs, maxOutput int) string {
		return `{"image":"img@sha256:` + strings.Repeat("a", 64) + `","workspace":{"kind":"empty"},"resources":{"cpus":1,"memoryBytes":67108864,"diskBytes":1048576,"pids":64,"runtimeMs":` +
			strconv.Itoa(runtimeMs) + `,"maxOutputBytes":` + strconv.Itoa(maxOutput) + `},"network":{"mode":"none"}}`
	}
	labels := func(poolExp time.Time, spec string) map[string]string {
		return map[string]string{LabelOwner: "gw", LabelPool: "1", LabelPoolExpires: strconv.FormatInt(poolExp.Unix(), 10), LabelSpec: spec}
	}
	// Warm containers carry zero limits (template); ones made before the
	// limits left the key carry their key's.
	pooledLabels := func(poolExp time.Time) map[string]string { return labels(poolExp, spec(0, 0)) }
	olderLabels := labels(now.Add(time.Hour), spec(60000, 1024))
	inMinute := now.Add(time.Minute)
	f := &fakeDocker{list: []container.Summary{
		{ID: "c-warm", Names: []string{"/hostgate-pool-01"}, State: "running", Labels: pooledLabels(now.Add(time.Hour))},
		{ID: "c-stale", Names: []string{"/hostgate-pool-02"}, State: "running", Labels: pooledLabels(now.Add(-time.Hour))},
		{ID: "c-claimed", Names: []string{"/" + claimedName(claimed{"run-1", inMinute, 90_000, 4096, now.Add(-time.Minute)})}, State: "running", Labels: pooledLabels(now.Add(time.Hour))},
		{ID: "c-older", Names: []string{"/hostgate-run-3--" + strconv.FormatInt(inMinute.Unix(), 10)}, State: "running", Labels: olderLabels},
		{ID: "c-over", Names: []string{"/" + claimedName(claimed{"run-2", now.Add(-time.Second), 90_000, 4096, now.Add(-time.Minute)})}, State: "running", Labels: pooledLabels(now.Add(time.Hour))},
		{ID: "c-badspec", Names: []string{"/" + claimedName(claimed{"run-4", inMinute, 90_000, 4096, now.Add(-time.Minute)})}, State: "running", Labels: labels(now.Add(time.Hour), "{")},
	}}
	h := fakeHost(t, f, now)
	got, err := h.Get(t.Context(), "run-1")
	if err != nil {
		t.Fatalf("claimed pooled container not adopted: %v", err)
	}
	// The limits are the claim's (from the name), not the template's label.
	if got.ContainerID != "c-claimed" || !got.ExpiresAt.Equal(now.Add(time.Minute)) || got.Resources.RuntimeMs != 90_000 ||
		got.Resources.MaxOutputBytes != 4096 || got.Resources.Pids != 64 {
		t.Fatalf("adopted %+v", got)
	}
	// A name from before the limits were recorded: the label's.
	if got, err := h.Get(t.Context(), "run-3"); err != nil || got.Resources.RuntimeMs != 60000 || got.Resources.MaxOutputBytes != 1024 {
		t.Fatalf("older claimed name adopted as %+v, %v", got, err)
	}
	if _, err := h.Get(t.Context(), "run-2"); err == nil {
		t.Fatal("claimed container past its deadline adopted")
	}
	f.mu.Lock()
	removed := slices.Clone(f.removed)
	f.mu.Unlock()
	slices.Sort(removed)
	if want := []string{"c-badspec", "c-over", "c-stale", "c-warm"}; !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
}

// TestAdoptedClaimCountsFromClaim: a claimed pooled container made long
// before its claim is adopted as made at the claim, which its name
// records: ListExecutions answers that createdAt, and SetTimeout counts
// the in-container deadline, which started at the claim, from there. From
// the container's creation it moved that deadline on by the time in the
// pool too, and the sandbox outlived its deadline by that much while no
// gateway watched it. SetTimeout's rename keeps the claim's time for the
// next start; a name of an older gateway, without it, falls back to the
// container's creation.
func TestAdoptedClaimCountsFromClaim(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	claim := now.Add(-30 * time.Second)
	made := claim.Add(-9 * time.Minute) // in the pool until the claim
	spec := `{"image":"img@sha256:` + strings.Repeat("a", 64) + `","workspace":{"kind":"empty"},"resources":{"cpus":1,"memoryBytes":67108864,"diskBytes":1048576,"pids":64,"runtimeMs":0,"maxOutputBytes":0},"network":{"mode":"none"}}`
	labels := map[string]string{LabelOwner: "gw", LabelPool: "1", LabelPoolExpires: strconv.FormatInt(now.Add(time.Hour).Unix(), 10), LabelSpec: spec, LabelDeadline: deadlineByScript}
	cl := claimed{id: "run-1", expires: claim.Add(time.Minute), runtimeMs: 60_000, maxOutputBytes: 4096, claimedAt: claim}
	f := &fakeDocker{list: []container.Summary{
		{ID: "c-claimed", Names: []string{"/" + claimedName(cl)}, State: "running", Created: made.Unix(), Labels: labels},
		{ID: "c-older", Names: []string{"/hostgate-run-2--" + strconv.FormatInt(cl.expires.Unix(), 10) + ".60000.4096"}, State: "running", Created: made.Unix(), Labels: labels},
	}}
	h := fakeHost(t, f, now)
	ctx := testCtx(t, time.Minute)
	l, err := h.ListExecutions(ctx, 0)
	if err != nil || len(l.Executions) != 2 {
		t.Fatalf("list: %+v %v", l, err)
	}
	created := map[string]time.Time{}
	for _, e := range l.Executions {
		created[e.ExecutionID] = e.CreatedAt
	}
	if !created["run-1"].Equal(claim) || !created["run-2"].Equal(made) {
		t.Fatalf("createdAt %v, want run-1 at its claim %v, run-2 (a name without it) at its container's creation %v", created, claim, made)
	}
	// Ten minutes from now is 570 s past the runtime that began at the
	// claim; rounded up, and a second's margin.
	h.mu.Lock()
	e := h.execs["run-1"].Execution
	h.mu.Unlock()
	if secs, ok := extension(e, now.Add(10*time.Minute)); !ok || secs != 571 {
		t.Fatalf("extension of run-1 to ten minutes from now: %d s (%v), want 571", secs, ok)
	}
	// Ten seconds from now is before the claim's runtime ends: nothing to
	// move in the container (no exec), only the name.
	moved, err := h.SetTimeout(ctx, "run-1", 10_000)
	if err != nil || !moved.ExpiresAt.Equal(now.Add(10*time.Second)) || !moved.CreatedAt.Equal(claim) {
		t.Fatalf("SetTimeout within the claim's runtime: %+v, %v", moved, err)
	}
	f.mu.Lock()
	renamed := slices.Clone(f.renamed)
	f.mu.Unlock()
	if len(renamed) != 1 {
		t.Fatalf("renames %q, want one", renamed)
	}
	cid, name, _ := strings.Cut(renamed[0], " ")
	got, ok := parseClaimedName(name)
	if want := (claimed{id: "run-1", expires: now.Add(10 * time.Second), runtimeMs: 60_000, maxOutputBytes: 4096, claimedAt: claim}); cid != "c-claimed" || !ok || got != want {
		t.Fatalf("SetTimeout renamed %s to %q (%+v), want %+v", cid, name, got, want)
	}
	// A container SetTimeout renamed that was never pooled: its name's
	// time too.
	fresh := map[string]string{LabelOwner: "gw", LabelExecution: "run-3", LabelExpires: fmtUnix(now.Add(-time.Minute)), LabelSpec: string(mustJSON(t, redact(validReq()))), LabelDeadline: deadlineByScript}
	cl3 := claimed{id: "run-3", expires: now.Add(time.Hour), runtimeMs: 60_000, maxOutputBytes: 4096, claimedAt: claim}
	f2 := &fakeDocker{list: []container.Summary{{ID: "c-fresh", Names: []string{"/" + claimedName(cl3)}, State: "running", Created: claim.Unix() + 1, Labels: fresh}}}
	h2 := fakeHost(t, f2, now)
	if got, err := h2.Get(ctx, "run-3"); err != nil || !got.CreatedAt.Equal(claim) {
		t.Fatalf("a renamed fresh container adopted as %+v, %v; want created at %v", got, err, claim)
	}
}

func TestPoolConfigRefused(t *testing.T) {
	good := emptyReq("img@sha256:"+strings.Repeat("a", 64), small())
	bad := good
	bad.Image = "busybox:latest" // a tag: refused like a request
	for name, pc := range map[string]PoolConfig{
		"unpinned key":  {Size: 1, Keys: []ProvisionRequest{good, bad}},
		"negative size": {Size: -1},
		"negative ttl":  {Size: 1, TTL: -time.Second},
	} {
		h, err := NewDocker(t.Context(), nil, &fakeDocker{}, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Pool: &pc})
		if err == nil {
			_ = h.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// testPoolConcurrentClaims: provisions racing for a small pool each get a
// container of their own; the pool hands out at most what it held.
func testPoolConcurrentClaims(t *testing.T) {
	cli, img := engine(t)
	req := emptyReq(img, small())
	h := newPoolHost(t, cli, PoolConfig{Size: 2, Keys: []ProvisionRequest{req}})
	waitPool(t, h, "a full pool", func(s PoolStats) bool { return s.Ready == 2 })
	const n = 4
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex, err := h.Provision(testCtx(t, 2*time.Minute), req)
			if err != nil {
				t.Errorf("provision: %v", err)
				return
			}
			ids[i] = ex.ContainerID
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Two were warm; a refill (after RefillDelay) could serve a very late
	// provision, never more than were filled.
	if s := h.PoolStats(); s.Hits+s.Misses != n || s.Hits < 2 || s.Hits > s.Fills {
		t.Fatalf("stats %+v, want %d provisions, at least 2 hits, no more hits than fills", s, n)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != n {
		t.Fatalf("a container went to two executions: %v", ids)
	}
}

// testPoolFillFailure: a key whose image cannot run executions (no sleep)
// fails to fill, counted; provisions fall back to a fresh create, which
// answers the usual invalid_request, and nothing is left behind.
func testPoolFillFailure(t *testing.T) {
	cli, _ := engine(t)
	busybox, err := os.ReadFile("/bin/busybox")
	testenv.RequirePeer(t, "/bin/busybox", err == nil)
	ref := importImage(t, cli, busybox, []string{"sh", "tar"})
	req := emptyReq(ref, small())
	h := newTestHost(t, cli, &Config{AllowUnpinnedImages: true, Pool: &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}}})
	waitPool(t, h, "a failed fill", func(s PoolStats) bool { return s.FillErrors >= 1 && s.Filling == 0 })
	_, err = h.Provision(testCtx(t, 2*time.Minute), req)
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "image" {
		t.Fatalf("got %v, want invalid_request on image", err)
	}
	if s := h.PoolStats(); s.Hits != 0 || s.Ready != 0 {
		t.Fatalf("stats %+v", s)
	}
	for _, c := range ownerContainers(t, cli, h) {
		waitRemoved(t, cli, c.ID, time.Minute)
	}
}

// TestPoolPlan checks the pool's bookkeeping on a fake clock: the refill
// waits RefillDelay after a claim but later claims do not push it back
// (a steady stream must not starve it), MaxTotal and MaxKeys bound it,
// expired containers leave, idle learned keys are forgotten.
func TestPoolPlan(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	h := &Docker{now: func() time.Time { return now }, logger: slog.New(slog.DiscardHandler)}
	p, err := newPool(h, PoolConfig{Size: 2, MaxTotal: 3, MaxKeys: 2, TTL: time.Minute, RefillDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k1 := poolKey{image: "a", network: "none"}
	k2 := poolKey{image: "b", network: "none"}
	k3 := poolKey{image: "c", network: "none"}
	plan := func() ([]*pooled, []poolKey, time.Time) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.planLocked(now)
	}
	// fillDone stands in for a finished fill.
	fillDone := func(k poolKey, expires time.Time) {
		p.mu.Lock()
		defer p.mu.Unlock()
		ks := p.keys[k]
		ks.filling--
		ks.ready = append(ks.ready, &pooled{cid: k.image, expires: expires})
	}

	if p.take(k1) != nil {
		t.Fatal("hit on an empty pool")
	}
	p.learn(k1) // its provision made a container
	if _, starts, next := plan(); len(starts) != 0 || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("refill started before RefillDelay: %v next %v", starts, next)
	}
	now = t0.Add(600 * time.Millisecond)
	p.take(k1) // a second claim does not push the refill back
	now = t0.Add(time.Second)
	if _, starts, _ := plan(); len(starts) != 2 {
		t.Fatalf("starts %v, want Size=2 fills for the learned key", starts)
	}
	p.take(k2)
	p.learn(k2)
	if p.take(k3) != nil {
		t.Fatal("hit on an unknown key")
	}
	if p.learn(k3); len(p.keys) != 2 {
		t.Fatalf("MaxKeys=2 exceeded: %d keys", len(p.keys))
	}
	now = t0.Add(3 * time.Second)
	if _, starts, _ := plan(); len(starts) != 1 || starts[0] != k2 {
		t.Fatalf("starts %v, want one fill for %v (MaxTotal=3)", starts, k2)
	}
	fillDone(k1, now.Add(time.Minute))
	fillDone(k1, now.Add(2*time.Minute))
	if pc := p.take(k1); pc == nil || !pc.expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("take = %+v, want the oldest warm container", pc)
	}
	now = now.Add(150 * time.Second)
	expired, _, _ := plan()
	if len(expired) != 1 {
		t.Fatalf("expired %d, want 1", len(expired))
	}
	// Idle past TTL with nothing warm or filling, a learned key is
	// forgotten; one with a fill in flight is kept until it ends.
	p.mu.Lock()
	_, k1kept := p.keys[k1]
	_, k2kept := p.keys[k2]
	p.keys[k2].filling, p.total = 0, 0 // its fills ended (failed)
	p.mu.Unlock()
	if k1kept || !k2kept {
		t.Fatalf("k1 kept %v (want forgotten), k2 kept %v (want kept while filling)", k1kept, k2kept)
	}
	now = now.Add(time.Second)
	if _, starts, _ := plan(); len(starts) != 0 || len(p.keys) != 0 {
		t.Fatalf("idle learned keys kept: %d keys, starts %v", len(p.keys), starts)
	}
	if s := p.stats(); s.Hits != 1 || s.Misses != 4 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPoolLearnsNoFailedKey: a provision that fails to make its container
// (an image the registry refuses) does not teach the pool its key. It
// did, and the pool then tried to fill it, pulling the image and logging
// an error, every 30 seconds for 10 minutes after, for each such request.
func TestPoolLearnsNoFailedKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := &fakeDocker{createErr: []error{cerrdefs.ErrNotFound}, pullErr: errors.New("manifest unknown")}
	// The clock stands still and RefillDelay is long: no fill starts
	// within the test, so only the provision uses the fake.
	h, err := NewDocker(testCtx(t, time.Minute), nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Now: func() time.Time { return now },
		Pool: &PoolConfig{Size: 1, RefillDelay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	req := validReq()
	if _, err := h.Provision(testCtx(t, time.Minute), req); ErrorCode(err) != CodeInvalidRequest {
		t.Fatalf("provision of an image the registry refuses: %v, want invalid_request", err)
	}
	h.pool.mu.Lock()
	n := len(h.pool.keys)
	h.pool.mu.Unlock()
	if n != 0 {
		t.Fatalf("the pool learned %d keys from a failed provision, want none", n)
	}
}
