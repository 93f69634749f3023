package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lowSpaceFloor is the free space under which the state dir's filesystem
// is low whatever its size; 1% of it counts where that is more. SQLite
// needs room for its journal beyond the rows it writes, and every write
// (tokens, pins, the audit log) fails once the disk is full: the warning
// must come while there is time to act.
const lowSpaceFloor = 64 << 20

// diskWatch is the free-space check of Config.StateDir: /readyz says
// "degraded" while it is low, and the gateway logs when it turns low and
// when it recovers.
type diskWatch struct {
	dir  string
	stat func(dir string) (free, total uint64, err error) // diskFree; tests replace it

	// statFailures logs the failures to measure, which every /readyz
	// probe meets while they last.
	statFailures *outageLog

	mu  sync.Mutex
	low bool
}

// newDiskWatch watches dir's filesystem.
func newDiskWatch(dir string) *diskWatch {
	return &diskWatch{dir: dir, stat: diskFree, statFailures: &outageLog{every: readyRelog, level: slog.LevelWarn,
		begin: "state dir: cannot measure its filesystem's free space, so /readyz cannot warn of a filling disk (logged again when the error changes, else every " + readyRelog.String() + ")",
		end:   "state dir: its filesystem's free space can be measured again"}}
}

// lowThreshold is the free space under which a filesystem of total bytes
// is low.
func lowThreshold(total uint64) uint64 { return max(lowSpaceFloor, total/100) }

// check measures the free space; why is non-empty when it is low.
func (d *diskWatch) check(s *Server) (why string) {
	free, total, err := d.stat(d.dir)
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			d.statFailures.failed(s.logger, err, time.Now(), "dir", d.dir)
		}
		return ""
	}
	d.statFailures.answered(s.logger, "dir", d.dir)
	limit := lowThreshold(total)
	low := free < limit
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case low && !d.low:
		s.logger.Warn("state dir: its filesystem is low on space; the state database's writes (tokens, host pins, the audit log) fail once it is full: free space there",
			"dir", d.dir, "freeBytes", free, "totalBytes", total, "thresholdBytes", limit)
	case !low && d.low:
		s.logger.Info("state dir: its filesystem has space again", "dir", d.dir, "freeBytes", free)
	}
	d.low = low
	if !low {
		return ""
	}
	return fmt.Sprintf("low on space: %d MiB free, under %d MiB; the gateway's log has where", free>>20, limit>>20)
}

// register adds hostgate_state_free_bytes, measured at each scrape.
func (d *diskWatch) register(reg *prometheus.Registry) {
	reg.MustRegister(&freeBytes{d: d, desc: prometheus.NewDesc("hostgate_state_free_bytes",
		"Free bytes of the state dir's filesystem (for the gateway's user); /readyz says degraded under 64 MiB or 1% of the filesystem. Absent while it cannot be measured (the gateway's log says why).",
		nil, nil)})
}

// freeBytes is hostgate_state_free_bytes. While the free space cannot be
// measured it is left out of the scrape, as Prometheus has an unknown
// value be: a made-up one (it said -1) set off low-space alerts with a
// value the disk never had, and a last value kept would say space is
// there when nothing knows. absent() alerts on the gap.
type freeBytes struct {
	d    *diskWatch
	desc *prometheus.Desc
}

func (f *freeBytes) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

func (f *freeBytes) Collect(ch chan<- prometheus.Metric) {
	free, _, err := f.d.stat(f.d.dir)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(free))
}
