// Package execroutes holds the executions API's routes, apart from the API
// itself (internal/execapi), which needs Docker and a Unix gateway: every
// gateway answers them, those without Docker executions (--docker off, no
// engine, a Windows build) with the same JSON docker_off error.
package execroutes

import (
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/internal/gateway"
)

// Routes are the route patterns of the executions API.
var Routes = []string{
	"POST /v1/executions",
	"GET /v1/executions/{id}",
	"POST /v1/executions/{id}/exec",
	"POST /v1/executions/{id}/checkpoints",
	"DELETE /v1/executions/{id}",
	"POST /v1/restores",
	"GET /v1/checkpoints",
	"GET /v1/checkpoints/{id}",
	"DELETE /v1/checkpoints/{id}",
	"GET /v1/executions",
	"POST /v1/executions/{id}/timeout",
}

// RegisterMethodNotAllowed answers other methods on the API's paths with
// a JSON 405 (the router's own answer is plain text).
func RegisterMethodNotAllowed(mux *http.ServeMux) {
	allow := map[string][]string{}
	var paths []string
	for _, p := range Routes {
		m, path, _ := strings.Cut(p, " ")
		if allow[path] == nil {
			paths = append(paths, path)
		}
		allow[path] = append(allow[path], m)
	}
	for _, path := range paths {
		methods := strings.Join(allow[path], ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			gateway.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here; allowed: "+methods)
		})
	}
}

// RegisterOff adds the API's routes answering 404 docker_off, for a
// gateway running without Docker; authorize runs first, so the answer
// tells an unauthenticated caller nothing.
func RegisterOff(mux *http.ServeMux, authorize func(w http.ResponseWriter, r *http.Request) bool) {
	RegisterOffWhy(mux, authorize, "")
}

// RegisterOffWhy is RegisterOff whose answers say why executions are off
// and what turns them on, why (one sentence, no final period; "" for
// the general "gateway serve --docker on|auto"): a gateway under --docker
// auto that found no engine told its callers to serve with auto.
func RegisterOffWhy(mux *http.ServeMux, authorize func(w http.ResponseWriter, r *http.Request) bool, why string) {
	msg := "Docker executions are off on this gateway (gateway serve --docker on|auto)"
	if why != "" {
		msg = "Docker executions are off on this gateway: " + why
	}
	for _, p := range Routes {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			if authorize(w, r) {
				gateway.WriteError(w, http.StatusNotFound, "docker_off", msg)
			}
		})
	}
	RegisterMethodNotAllowed(mux)
}
