package execapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/textcut"
)

// FuzzListQuery: the two list routes' query strings are a caller's,
// whatever bytes they hold. A query is answered 200 exactly when every
// parameter is one the route takes, given once, with a value it takes;
// any other is a 400 invalid_request whose message starts with the name
// of a parameter that is wrong (a misspelt filter answered with every
// checkpoint once), and never a 5xx.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5", "limit=0", "limit=10001", "limit=+7", "limit=1&limit=2",
		"executionid=exec-1", "executionId=", "executionId=exec-1&limit=3", "executionId=..%2F..",
		"limit=%zz", "a;b=c", "limit=5&x=1&y=2", "=1", "limit", strings.Repeat("k", 100) + "=1"} {
		f.Add(s)
	}
	ex := newFakeExecutions()
	ex.add("exec-1", "img", "")
	api, err := New(ex, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }})
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	routes := []struct {
		path   string
		params []string
		max    int
	}{
		{"/v1/executions", []string{"limit"}, dockerhost.MaxExecutionListLimit},
		{"/v1/checkpoints", []string{"executionId", "limit"}, dockerhost.MaxCheckpointListLimit},
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, rt := range routes {
			req := httptest.NewRequest("GET", rt.path, nil)
			req.URL.RawQuery = raw
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			// What the route must name, in the order it checks: the
			// parameters it does not take or was given twice, else a
			// limit out of range, else an execution id that is none.
			q := req.URL.Query()
			var wrong []string
			for k, vs := range q {
				if !slices.Contains(rt.params, k) || len(vs) > 1 {
					wrong = append(wrong, k)
				}
			}
			if l := q.Get("limit"); len(wrong) == 0 && l != "" {
				if n, err := strconv.Atoi(l); err != nil || n < 1 || n > rt.max {
					wrong = append(wrong, "limit")
				}
			}
			if id := q.Get("executionId"); len(wrong) == 0 && q.Has("executionId") && (id == "" || !store.ValidHostID(id)) {
				wrong = append(wrong, "executionId")
			}
			if len(wrong) == 0 {
				var list map[string]json.RawMessage
				if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil || list["truncated"] == nil {
					t.Fatalf("GET %s?%s: %d %q, want 200 and a list", rt.path, raw, rec.Code, rec.Body)
				}
				continue
			}
			e, ok := wire.ParseError(rec.Body.Bytes())
			if rec.Code != http.StatusBadRequest || !ok || e.Code != dockerhost.CodeInvalidRequest {
				t.Fatalf("GET %s?%s: %d %q, want 400 invalid_request naming one of %q", rt.path, raw, rec.Code, rec.Body, wrong)
			}
			if !slices.ContainsFunc(wrong, func(k string) bool { return strings.HasPrefix(e.Message, asJSON(textcut.Cut(k, 64))+": ") }) {
				t.Fatalf("GET %s?%s: %q names none of %q", rt.path, raw, e.Message, wrong)
			}
		}
	})
}

// asJSON is s as a JSON string carries it: each byte that is not UTF-8
// is U+FFFD (a parameter named "\x95" is named "\ufffd").
func asJSON(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}
