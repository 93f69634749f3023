package forward

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/forward/internal/forwardtest"
)

// BenchmarkPreview measures requests/s and p99 latency of small GETs to a dev
// server, directly and through the preview proxy, in the same run. Compare
// the sub-benchmarks' req/s and p99-µs.
func BenchmarkPreview(b *testing.B) {
	e := newPreviewEnv(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), nil)
	for _, mode := range []struct{ name, url string }{
		{"direct", e.dev.URL + "/"},
		{"preview", e.pathURL("/")},
	} {
		b.Run(mode.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			var (
				mu  sync.Mutex
				all []time.Duration
			)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var lat []time.Duration
				for pb.Next() {
					t0 := time.Now()
					resp, err := client.Get(mode.url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
					lat = append(lat, time.Since(t0))
				}
				mu.Lock()
				all = append(all, lat...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			reportLatency(b, all, elapsed)
		})
	}
}

func reportLatency(b *testing.B, all []time.Duration, elapsed time.Duration) {
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
}

// forwardModes starts, for a target address, a direct path and the two local
// forwards over a loopback Forwarder: the root package's Host.Forward and
// this package's Run.
func forwardModes(b *testing.B, target string) []forwardtest.Mode {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	h := newHost(b, newLoopForwarder())
	hf, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: target})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hf.Close() })
	fw, err := Run(ctx, h, Spec{Kind: Local, Listen: "127.0.0.1:0", Connect: target})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fw.Close() })
	return []forwardtest.Mode{
		{Name: "direct", Addr: target}, {Name: "host-forward", Addr: hf.Addr().String()}, {Name: "forward-run", Addr: fw.Addr().String()},
	}
}

// BenchmarkLocalForwardThroughput pushes 1 MiB per op over one connection:
// direct, through Host.Forward and through Run, same run.
func BenchmarkLocalForwardThroughput(b *testing.B) {
	forwardtest.BenchThroughput(b, forwardModes(b, forwardtest.Serve(b, forwardtest.Sink)))
}

// BenchmarkLocalForwardRoundTrip measures a 64-byte echo round trip over an
// open connection, and the p99.
func BenchmarkLocalForwardRoundTrip(b *testing.B) {
	forwardtest.BenchRoundTrip(b, forwardModes(b, forwardtest.Serve(b, forwardtest.Echo)))
}

// BenchmarkPreviewInterleaved alternates one direct and one preview GET per
// op on one client, so that both see the same machine load; it reports each
// side's mean and p99 latency and the ratio of means. On a busy machine this
// ratio is steadier than comparing the sub-benchmarks of BenchmarkPreview.
func BenchmarkPreviewInterleaved(b *testing.B) {
	e := newPreviewEnv(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	urls := []string{e.dev.URL + "/", e.pathURL("/")}
	lat := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	for range b.N {
		for i, u := range urls {
			t0 := time.Now()
			resp, err := client.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	reportPair(b, "direct", "preview", lat[0], lat[1])
}

// reportPair reports mean and p99 of two interleaved latency series and the
// ratio of their means (b over a).
func reportPair(b *testing.B, an, bn string, a, c []time.Duration) {
	mean := func(d []time.Duration) float64 {
		var s time.Duration
		for _, x := range d {
			s += x
		}
		return float64(s.Microseconds()) / float64(len(d))
	}
	p99 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)*99/100].Microseconds())
	}
	ma, mc := mean(a), mean(c)
	b.ReportMetric(ma, an+"-mean-µs")
	b.ReportMetric(mc, bn+"-mean-µs")
	b.ReportMetric(p99(a), an+"-p99-µs")
	b.ReportMetric(p99(c), bn+"-p99-µs")
	if ma > 0 {
		b.ReportMetric(mc/ma, bn+"/"+an)
	}
}
