package execapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// engineOfLive is a container engine that holds the running containers of
// executions a previous gateway left (which the host adopts) and makes no
// new ones: enough for a real dockerhost.Docker to count its live
// sandboxes and fail a provision after it passed the bound.
type engineOfLive struct {
	dockerhost.DockerAPI // nil: a call the test did not expect fails it loudly

	mu      sync.Mutex
	list    []container.Summary
	removed chan string
}

func (f *engineOfLive) Ping(context.Context) (types.Ping, error) { return types.Ping{}, nil }

func (f *engineOfLive) ContainerList(_ context.Context, opts container.ListOptions) ([]container.Summary, error) {
	if slices.ContainsFunc(opts.Filters.Get("label"), func(l string) bool { return strings.HasPrefix(l, dockerhost.LabelUID+"=") }) {
		return nil, nil // a uid asked about before a create: free
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.list), nil
}

func (f *engineOfLive) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	return container.InspectResponse{}, errors.New("fake: no inspect")
}

func (f *engineOfLive) ContainerCreate(context.Context, *container.Config, *container.HostConfig, *network.NetworkingConfig, *ocispec.Platform, string) (container.CreateResponse, error) {
	return container.CreateResponse{}, errors.New("fake: the engine makes no container")
}

func (f *engineOfLive) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	f.mu.Lock()
	f.list = slices.DeleteFunc(f.list, func(c container.Summary) bool { return c.ID == id })
	f.mu.Unlock()
	f.removed <- id
	return nil
}

// TestSandboxMaxBound: past --sandbox-max live sandboxes a provision
// answers 503 busy, naming the bound and the flag, with Retry-After, and
// makes nothing; a terminate, a runtime's end and a provision that failed
// give their slot back. There was no bound: every provision went on to the
// engine, until the machine ran out of memory, pids or disk.
func TestSandboxMaxBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	now := time.Now()
	spec, _ := json.Marshal(map[string]any{
		"image": "busybox@sha256:" + strings.Repeat("a", 64), "workspace": map[string]any{"kind": "empty"},
		"resources": map[string]any{"cpus": 0.5, "memoryBytes": 64 << 20, "diskBytes": 8 << 20, "pids": 64, "runtimeMs": 120_000, "maxOutputBytes": 1 << 20},
		"network":   map[string]any{"mode": "none"},
	})
	live := func(id string, expires time.Time, uid int) container.Summary {
		return container.Summary{ID: "c-" + id, State: "running", Labels: map[string]string{
			dockerhost.LabelExecution: id, dockerhost.LabelExpires: strconv.FormatInt(expires.Unix(), 10),
			dockerhost.LabelSpec: string(spec), dockerhost.LabelOwner: "gw", dockerhost.LabelUID: strconv.Itoa(uid),
		}}
	}
	// Three a previous gateway left, one more than the bound: adopted
	// all the same, and counted.
	eng := &engineOfLive{removed: make(chan string, 16), list: []container.Summary{
		live("long1", now.Add(time.Hour), 2_000_000_001),
		live("long2", now.Add(time.Hour), 2_000_000_002),
		// Ends at its runtime within seconds (labels are whole seconds).
		live("short", now.Add(2*time.Second), 2_000_000_003),
	}}
	h, err := dockerhost.NewDocker(ctx, nil, eng, &dockerhost.Config{Owner: "gw", CheckpointDir: t.TempDir(), MaxLive: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Close() }()
	api, err := New(h, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, stop := serveAPI(api)
	defer func() { stop(nil); srv.Close() }()

	call := func(method, path string, body any) (int, string, wire.ErrorBody) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = strings.NewReader(string(j))
		}
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, rd)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var eb wire.ErrorBody
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &eb); err != nil {
				t.Fatalf("%s %s: %d, not JSON: %q", method, path, res.StatusCode, raw)
			}
		}
		return res.StatusCode, res.Header.Get("Retry-After"), eb
	}
	var provision map[string]any
	_ = json.Unmarshal(spec, &provision)
	status, retry, eb := call(http.MethodPost, "/v1/executions", provision)
	if status != http.StatusServiceUnavailable || eb.Error.Code != "busy" || retry == "" ||
		!strings.Contains(eb.Error.Message, "runs 3 sandboxes") || !strings.Contains(eb.Error.Message, "--sandbox-max") {
		t.Fatalf("provision with 3 sandboxes live, --sandbox-max 2: %d %+v (Retry-After %q), want 503 busy naming the count and --sandbox-max, with Retry-After", status, eb, retry)
	}

	// A terminate and a runtime's end each give a slot back (with one
	// slot held still, the bound of 2 would be reached): the provision
	// then reaches the engine, which fails it (502), and that failure
	// gives its slot back in turn, so the next one reaches it too.
	if status, _, eb := call(http.MethodDelete, "/v1/executions/long1", nil); status != http.StatusNoContent {
		t.Fatalf("terminate: %d %+v", status, eb)
	}
	for short := false; !short; {
		select {
		case id := <-eng.removed:
			short = id == "c-short"
		case <-ctx.Done():
			t.Fatal("the short execution's runtime did not end it")
		}
	}
	for i := range 3 {
		if status, _, eb := call(http.MethodPost, "/v1/executions", provision); status != http.StatusBadGateway {
			t.Fatalf("provision %d with 1 sandbox live, --sandbox-max 2 (the engine fails it): %d %+v, want 502 engine_error", i, status, eb)
		}
	}
}
