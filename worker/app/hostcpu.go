package app

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/subflow-dev/subflow/internal/hostcpu"
)

// hostBusyShare is the share of the host's CPU time in use above which the host is busy: a
// worker whose drives wait on a model's API leaves most of it idle; batches of scripted
// drives on the embedded server keep 0.8–0.9 of it in use (docs/benchmarks.md, "Interactive
// latency under batches", the same reading).
const hostBusyShare = 0.5

// hostSampleEvery is how often hostCPU reads the host's CPU times: each reading says how
// busy the host was since the one before.
const hostSampleEvery = time.Second

// hostCPU says whether the host's CPU was busy over its last sample interval. One that
// cannot read the host's CPU times (no /proc/stat: not Linux) is never busy.
type hostCPU struct {
	busy atomic.Bool
}

// Busy reports whether the host's CPU was busy over the last sample interval.
func (h *hostCPU) Busy() bool { return h.busy.Load() }

// watchHostCPU samples the CPU times in path (hostcpu.Path) every interval until ctx is
// done. It returns the error of the first reading, with a hostCPU that is never busy, when
// path cannot be read.
func watchHostCPU(ctx context.Context, path string, every time.Duration) (*hostCPU, error) {
	h := &hostCPU{}
	prev, err := hostcpu.Read(path)
	if err != nil {
		return h, err
	}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cur, err := hostcpu.Read(path)
			if err != nil {
				h.busy.Store(false)
				continue
			}
			if cur.Total == prev.Total {
				continue // no tick since the last reading: nothing to say
			}
			h.busy.Store(cur.BusyShareSince(prev) >= hostBusyShare)
			prev = cur
		}
	}()
	return h, nil
}
