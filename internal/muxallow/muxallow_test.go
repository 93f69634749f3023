package muxallow

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// A path routed for GET and POST, asked with PUT, lists GET and POST (and
// HEAD, which a GET route serves), not the catch-all's every method; an
// unrouted path lists none.
func TestMethods(t *testing.T) {
	m := http.NewServeMux()
	m.HandleFunc("GET /a", func(http.ResponseWriter, *http.Request) {})
	m.HandleFunc("POST /a", func(http.ResponseWriter, *http.Request) {})
	m.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	all := []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut}
	if got := Methods(m, httptest.NewRequest(http.MethodPut, "/a", nil), "/", all...); !slices.Equal(got, []string{"GET", "HEAD", "POST"}) {
		t.Errorf("PUT /a: %v, want GET HEAD POST", got)
	}
	if got := Methods(m, httptest.NewRequest(http.MethodGet, "/a", nil), "/", all...); !slices.Equal(got, []string{"HEAD", "POST"}) {
		t.Errorf("GET /a: %v, want HEAD POST (its own left out)", got)
	}
	if got := Methods(m, httptest.NewRequest(http.MethodPut, "/b", nil), "/", all...); len(got) != 0 {
		t.Errorf("PUT /b: %v, want none", got)
	}
}
