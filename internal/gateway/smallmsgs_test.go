package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// TestTooLargeSaysLimit: a body past the API's bound is 413 saying the
// bound and what to send instead, not only that it is too large.
func TestTooLargeSaysLimit(t *testing.T) {
	e := newEnv(t, nil)
	client := e.token(store.RoleClient, "a")
	body := `{"publicKey":"` + strings.Repeat("A", maxBody) + `"}`
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	we, _ := wire.ParseError(b)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(we.Message, "64 KiB") {
		t.Errorf("%d %q: want 413 naming the 64 KiB limit", res.StatusCode, we.Message)
	}
}

// TestCrossOriginRefusalSaysWhatToDo: a cookie-carrying POST from another
// site's page is 403, saying what works instead: the gateway's own pages,
// or the token as a bearer, which no other page can send.
func TestCrossOriginRefusalSaysWhatToDo(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", strings.NewReader(`{}`))
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: admin})
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	we, _ := wire.ParseError(b)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(we.Message, "Authorization: Bearer") || !strings.Contains(we.Message, "gateway's own") {
		t.Errorf("%d %q: want 403 saying to use the gateway's own pages or send the token as Authorization: Bearer", res.StatusCode, we.Message)
	}
}

// blockingCollector holds every Collect until release is closed, telling
// in of each that began.
type blockingCollector struct {
	in      chan struct{}
	release chan struct{}
}

func (b *blockingCollector) Describe(chan<- *prometheus.Desc) {}

func (b *blockingCollector) Collect(chan<- prometheus.Metric) {
	select {
	case b.in <- struct{}{}:
	case <-b.release:
		return
	}
	<-b.release
}

// TestMetricsScrapesBounded: scrapes in flight are bounded (each walks
// every tunnel under the registry's lock), so one past the bound is
// answered 503 at once rather than queued behind the others.
func TestMetricsScrapesBounded(t *testing.T) {
	e := newEnv(t, nil)
	b := &blockingCollector{in: make(chan struct{}), release: make(chan struct{})}
	e.srv.Metrics().MustRegister(b)
	scrape := func() (int, error) {
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/metrics", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, nil
	}
	done := make(chan error, maxScrapesInFlight)
	for range maxScrapesInFlight {
		go func() {
			code, err := scrape()
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("a scrape within the bound: %d", code)
			}
			done <- err
		}()
	}
	for range maxScrapesInFlight {
		select {
		case <-b.in:
		case <-e.ctx.Done():
			t.Fatal("the scrapes within the bound did not all start")
		}
	}
	code, err := scrape()
	close(b.release)
	for range maxScrapesInFlight {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("a scrape past %d in flight: %d %v, want 503", maxScrapesInFlight, code, err)
	}
}
