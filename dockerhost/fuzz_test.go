package dockerhost

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// FuzzProvisionRequest: any body either is refused with an
// invalid_request naming a field, or yields a hardened container config.
func FuzzProvisionRequest(f *testing.F) {
	good, _ := json.Marshal(validReq())
	f.Add(good)
	f.Add([]byte(`{"image":"x@sha256:` + strings.Repeat("a", 64) + `","workspace":{"kind":"git-worktree","repositoryPath":"/r","revision":"-x"}}`))
	f.Add([]byte(`{"resources":{"cpus":1e309}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ProvisionRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		p := testPolicy()
		if err := p.ValidateProvision(&req); err != nil {
			var e *Error
			if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field == "" {
				t.Fatalf("refusal without a field: %v", err)
			}
			return
		}
		_, hc, err := p.ContainerConfig("id", sandboxUIDBase, req, time.Unix(0, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		if hc.NanoCPUs <= 0 || hc.Memory <= 0 || hc.MemorySwap != hc.Memory || *hc.PidsLimit <= 0 || hc.NetworkMode != "none" || !hc.ReadonlyRootfs {
			t.Fatalf("accepted request gave a loose config: %+v", hc)
		}
		for k := range req.Env {
			if looksSecret(k) {
				t.Fatalf("secret-looking env %q accepted", k)
			}
		}
	})
}

// FuzzAdoptable: container labels are read back after a restart; whatever
// they hold, adoption never panics and adopts only complete executions.
func FuzzAdoptable(f *testing.F) {
	spec, _ := json.Marshal(validReq())
	f.Add("exec-1", "4102444800", string(spec), "running")
	f.Add("", "x", "{", "exited")
	f.Add("../x", "-1", "null", "running")
	f.Fuzz(func(t *testing.T, id, expires, spec, state string) {
		c := container.Summary{ID: "c", State: state, Labels: map[string]string{LabelExecution: id, LabelExpires: expires, LabelSpec: spec}}
		e, ok := adoptable(c, time.Unix(1_800_000_000, 0))
		if !ok {
			return
		}
		if e.ExecutionID != id || !executionIDRE.MatchString(id) || state != "running" || e.Resources.MaxOutputBytes <= 0 || e.Resources.DiskBytes <= 0 {
			t.Fatalf("adopted an incomplete execution: %+v", e)
		}
	})
}

func FuzzParseOOMKills(f *testing.F) {
	f.Add("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
	f.Add("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
	f.Fuzz(func(t *testing.T, s string) {
		if n := parseOOMKills(s); n < 0 {
			t.Fatalf("negative count %d", n)
		}
	})
}

func TestParseOOMKills(t *testing.T) {
	for in, want := range map[string]int64{
		"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n": 3, // cgroup v1 memory.oom_control
		"low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n":     2, // cgroup v2 memory.events
		"oom_kill_disable 0\nunder_oom 0\n":             0, // kernel without the counter
		"oom_kill x\n":                                  0,
	} {
		if got := parseOOMKills(in); got != want {
			t.Errorf("parseOOMKills(%q) = %d, want %d", in, got, want)
		}
	}
}

// FuzzClaimedPooled: a pooled container whose name says it was claimed
// (the name's execution, deadline, limits and claim) is read as that
// execution, with the limits of its name in its spec label when the label
// is a request, and the label left as it was when not; the listing's own
// labels are never changed; and one that adoptable takes runs under the
// name's limits, created at the name's claim when it records one.
func FuzzClaimedPooled(f *testing.F) {
	spec, _ := json.Marshal(validReq())
	f.Add("/hostgate-exec-1--1900000000.60000.1024", string(spec))
	f.Add("/hostgate-exec-1--1900000000", string(spec))
	f.Add("/hostgate-exec-1--1900000000.60000.1024.1899999000", string(spec))
	f.Add("/hostgate-exec-1--1900000000.60000.1024", "{")
	f.Add("/hostgate-exec-1--1900000000.60000.1024", "null")
	f.Add("/hostgate-exec-1--1900000000.60000.1024", `{"resources":{"runtimeMs":"x"}}`)
	f.Add("/hostgate-pool-0011", string(spec))
	f.Fuzz(func(t *testing.T, name, spec string) {
		labels := map[string]string{LabelOwner: "gw", LabelPool: "1", LabelSpec: spec}
		c := container.Summary{ID: "c", State: "running", Names: []string{name}, Labels: labels}
		got, ok := claimedPooled(c)
		if len(labels) != 3 || labels[LabelSpec] != spec || labels[LabelExecution] != "" {
			t.Fatalf("the listing's labels changed: %v", labels)
		}
		cl, named := parseClaimedName(name)
		if ok != named {
			t.Fatalf("%q: claimed %v, name parses %v", name, ok, named)
		}
		if !ok {
			return
		}
		if got.Labels[LabelExecution] != cl.id || got.Labels[LabelExpires] != strconv.FormatInt(cl.expires.Unix(), 10) {
			t.Fatalf("%q read as %v", name, got.Labels)
		}
		var before ProvisionRequest
		if cl.runtimeMs == 0 || json.Unmarshal([]byte(spec), &before) != nil {
			if got.Labels[LabelSpec] != spec {
				t.Fatalf("spec %q rewritten as %q", spec, got.Labels[LabelSpec])
			}
			return
		}
		var after ProvisionRequest
		if err := json.Unmarshal([]byte(got.Labels[LabelSpec]), &after); err != nil {
			t.Fatalf("rewritten spec %q: %v", got.Labels[LabelSpec], err)
		}
		if after.Resources.RuntimeMs != cl.runtimeMs || after.Resources.MaxOutputBytes != cl.maxOutputBytes {
			t.Fatalf("%q: spec limits %+v", name, after.Resources)
		}
		after.Resources.RuntimeMs, after.Resources.MaxOutputBytes = before.Resources.RuntimeMs, before.Resources.MaxOutputBytes
		if a, b := mustJSON(t, after), mustJSON(t, before); a != b {
			t.Fatalf("beyond the limits, spec %s became %s", b, a)
		}
		if e, ok := adoptable(got, time.Unix(1_800_000_000, 0)); ok && (e.Resources.RuntimeMs != cl.runtimeMs || e.Resources.MaxOutputBytes != cl.maxOutputBytes) {
			t.Fatalf("%q adopted with limits %+v", name, e.Resources)
		} else if ok && !cl.claimedAt.IsZero() && !e.CreatedAt.Equal(cl.claimedAt) {
			t.Fatalf("%q adopted as created at %v, not at its claim", name, e.CreatedAt)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
