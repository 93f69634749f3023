package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// TestSharesEndWithTheirExecution: a public share of a sandbox's port ends
// with the sandbox, however it ends (a DELETE, its runtime, its runtime
// while no gateway ran): it is gone from the shares API and its URL
// answers an anonymous viewer what a port never shared answers. It stayed
// listed and live (the sweep's hostile42): ids of ended executions are
// refused only while their tombstones last, and a share lasts up to 7
// days, long enough to publish the port of whatever next took the id.
func TestSharesEndWithTheirExecution(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 6*time.Minute)
	suffix := time.Now().Format("150405.000000")
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	// anon is what an anonymous viewer of port's path-form preview gets:
	// the status and the error code.
	anon := func(id, port string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", g.url+"/preview/"+id+"/"+port+"/", nil)
		req.Header.Set("Accept", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		b, _ := io.ReadAll(res.Body)
		_ = json.Unmarshal(b, &body)
		return res.Status + " " + body.Error.Code
	}
	listed := func(id string) string {
		t.Helper()
		status, b := g.api("GET", "/v1/hosts/"+id+"/shares", g.admin, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s's shares: %d %s", id, status, b)
		}
		return string(b)
	}
	share := func(id string) {
		t.Helper()
		status, b := g.api("POST", "/v1/hosts/"+id+"/shares", g.admin, map[string]any{"port": 8000, "ttlSeconds": 3600})
		if status != http.StatusCreated {
			t.Fatalf("share %s:8000: %d %s", id, status, b)
		}
		if l := listed(id); !strings.Contains(l, `"port":8000`) {
			t.Fatalf("%s's shares right after one was made: %s", id, l)
		}
		// Live: the viewer gets through to the sandbox, where nothing
		// listens, not the login a port never shared answers.
		if shared, never := anon(id, "8000"), anon(id, "8001"); shared == never {
			t.Fatalf("%s:8000 shared answers %q, as the never-shared 8001 does", id, shared)
		}
	}
	// wantGone: an ended execution's shares are gone with it. Its shares
	// answer what its other host routes do, 410 gone with the end's
	// reason, where an empty list said nothing of the sandbox being gone;
	// one whose end no gateway saw (no tombstone: reason "") is no host,
	// 404, as its execution is.
	wantGone := func(id, reason string) {
		t.Helper()
		if reason == "" {
			if status, b := g.api("GET", "/v1/hosts/"+id+"/shares", g.admin, nil); status != http.StatusNotFound || !strings.Contains(string(b), `"not_found"`) {
				t.Errorf("%s ended unseen: its shares answer %d %s, want 404 not_found, as its execution answers", id, status, b)
			}
		} else {
			status, b := g.api("GET", "/v1/hosts/"+id+"/shares", g.admin, nil)
			var body struct {
				Error struct{ Code, Reason, EndedAt string } `json:"error"`
			}
			_ = json.Unmarshal(b, &body)
			if status != http.StatusGone || body.Error.Code != "gone" || body.Error.Reason != reason || body.Error.EndedAt == "" {
				t.Errorf("%s ended (%s): its shares answer %d %s, want 410 gone with reason %s and endedAt", id, reason, status, b, reason)
			}
			// A share of it is refused the same way, not as a host never
			// enrolled.
			status, b = g.api("POST", "/v1/hosts/"+id+"/shares", g.admin, map[string]any{"port": 8000, "ttlSeconds": 3600})
			if status != http.StatusGone || !strings.Contains(string(b), `"reason":"`+reason+`"`) {
				t.Errorf("share of %s, ended (%s): %d %s, want 410 gone with reason %s", id, reason, status, b, reason)
			}
		}
		if shared, never := anon(id, "8000"), anon(id, "8001"); shared != never {
			t.Errorf("%s ended: its shared 8000 answers %q, its never-shared 8001 %q", id, shared, never)
		}
	}
	waitEnded := func(c *client.Client, id string, within time.Duration) {
		t.Helper()
		for end := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
			_, err := c.Execution(ctx, id)
			if ae := apiErr(err); ae != nil && ae.Status == http.StatusGone {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s: %v, want 410 gone within %v", id, err, within)
			}
		}
	}

	short := execRequest(image)
	short.Resources.RuntimeMs = 8000
	short.ExecutionID = "shrt-" + suffix
	ran := provisionShort(t, ctx, c, short, 4*time.Second)
	share(ran.ExecutionID)

	deleted := execRequest(image)
	deleted.ExecutionID = "del-" + suffix
	provision(t, ctx, c, deleted)
	share(deleted.ExecutionID)
	if err := c.Terminate(ctx, deleted.ExecutionID); err != nil {
		t.Fatal(err)
	}
	wantGone(deleted.ExecutionID, "terminated")

	waitEnded(c, ran.ExecutionID, 2*time.Minute)
	wantGone(ran.ExecutionID, "runtime")

	// Ended while no gateway ran: the restarted gateway reaps it.
	short.ExecutionID = "rst-" + suffix
	short.Resources.RuntimeMs = 8000
	reaped := provisionShort(t, ctx, c, short, 4*time.Second)
	share(reaped.ExecutionID)
	container := containerOf(t, reaped.ExecutionID)
	g.stop()
	// The sandbox keeps its own deadline: its container goes by itself.
	for end := time.Now().Add(2 * time.Minute); exec.Command("docker", "inspect", container).Run() == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("container %s of %s still there 2 min after its runtime with no gateway", container, reaped.ExecutionID)
		}
	}
	g.restart("--docker", "on", "--agent-binary", bin.agent, "--sandbox-image", image)
	c2, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Its end was seen by no gateway: not found, not gone.
	if _, err := c2.Execution(ctx, reaped.ExecutionID); apiErr(err) == nil || apiErr(err).Status != http.StatusNotFound {
		t.Fatalf("%s after the restart: %v, want 404", reaped.ExecutionID, err)
	}
	wantGone(reaped.ExecutionID, "")
}
