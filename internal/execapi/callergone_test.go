package execapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// recordsHandler hands each log record's level and message on.
type recordsHandler struct{ records chan slog.Record }

func (h recordsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r.Clone()
	return nil
}
func (h recordsHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordsHandler) WithGroup(string) slog.Handler      { return h }

// TestCallerGoneIsNotAFailure: a caller that goes away while its
// execution's agent starts, or while its checkpoint waits, is no agent or
// engine failure: the gateway logged each at ERROR, the first telling the
// operator to check --agent-binary, for every client that timed out. The
// execution provisioned for a caller gone is still terminated.
func TestCallerGoneIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	records := make(chan slog.Record, 64)
	f.api.log = slog.New(recordsHandler{records})
	call := func(path string, body any, started <-chan struct{}) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-started:
				cancel()
			case <-ctx.Done():
			}
		}()
		j, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", f.srv.URL+path, bytes.NewReader(j))
		req.Header.Set("Authorization", "Bearer admin")
		if res, err := f.srv.Client().Do(req); err == nil {
			_ = res.Body.Close()
			t.Fatalf("POST %s answered %d; want the caller gone first", path, res.StatusCode)
		}
	}
	noErrors := func(what string) {
		t.Helper()
		for {
			select {
			case r := <-records:
				if r.Level >= slog.LevelError {
					t.Errorf("%s: logged at %v: %s", what, r.Level, r.Message)
				}
			default:
				return
			}
		}
	}

	started := make(chan struct{}, 1)
	f.pool.beforeAttachCtx = func(ctx context.Context, id string) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	body := provisionBody()
	body["executionId"] = "caller-gone"
	call("/v1/executions", body, started)
	// Forgotten last, once its execution is terminated.
	select {
	case id := <-f.forgot:
		if id != "caller-gone" {
			t.Fatalf("forgot %q", id)
		}
	case <-time.After(wait):
		t.Fatal("the abandoned provision's execution was not forgotten")
	}
	if _, err := f.ex.Get(context.Background(), "caller-gone"); err == nil {
		t.Error("the abandoned provision's execution lives on")
	}
	noErrors("provision abandoned while its agent started")

	f.pool.beforeAttachCtx = nil
	status, answer := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id, _ := answer["executionId"].(string)
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, answer)
	}
	noErrors("provision")
	f.ex.blocked = make(chan struct{}, 1)
	call("/v1/executions/"+id+"/checkpoints", map[string]any{"reason": "block"}, f.ex.blocked)
	select {
	case r := <-records:
		if r.Level >= slog.LevelError {
			t.Errorf("checkpoint abandoned: logged at %v: %s", r.Level, r.Message)
		}
	case <-time.After(wait):
		t.Fatal("the abandoned checkpoint logged nothing")
	}
}
