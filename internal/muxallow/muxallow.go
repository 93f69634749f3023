// Package muxallow says which methods an http.ServeMux routes a path for,
// for a mux whose catch-all route (one that takes every method) keeps the
// mux from answering 405 with an Allow header itself.
package muxallow

import "net/http"

// Methods lists those of methods, in their order, that m routes r's path
// for by a route other than catchAll (r's own method left out).
func Methods(m *http.ServeMux, r *http.Request, catchAll string, methods ...string) []string {
	var allow []string
	for _, method := range methods {
		if method == r.Method {
			continue
		}
		probe := &http.Request{Method: method, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := m.Handler(probe); pattern != catchAll && pattern != "" {
			allow = append(allow, method)
		}
	}
	return allow
}
