package app

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// procStat is where Linux reports the host's CPU times.
const procStat = "/proc/stat"

// hostBusyShare is the share of the host's CPU time in use above which the host is busy: a
// worker whose drives wait on a model's API leaves most of it idle; batches of scripted
// drives on the embedded server keep 0.8–0.9 of it in use (docs/benchmarks.md, "Interactive
// latency under batches").
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

// watchHostCPU samples the CPU times in path (procStat) every interval until ctx is done.
// It returns the error of the first reading, with a hostCPU that is never busy, when path
// cannot be read.
func watchHostCPU(ctx context.Context, path string, every time.Duration) (*hostCPU, error) {
	h := &hostCPU{}
	prev, err := readCPUTimes(path)
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
			cur, err := readCPUTimes(path)
			if err != nil {
				h.busy.Store(false)
				continue
			}
			if cur.total == prev.total {
				continue // no tick since the last reading: nothing to say
			}
			h.busy.Store(cur.busyShareSince(prev) >= hostBusyShare)
			prev = cur
		}
	}()
	return h, nil
}

// cpuTimes are the host's CPU times summed over its CPUs, in clock ticks since boot.
type cpuTimes struct {
	idle, total uint64
}

// busyShareSince is the share of the time from prev to t the CPUs were not idle.
func (t cpuTimes) busyShareSince(prev cpuTimes) float64 {
	if t.total <= prev.total || t.idle < prev.idle {
		return 0
	}
	return 1 - float64(t.idle-prev.idle)/float64(t.total-prev.total)
}

// readCPUTimes reads the first line of a /proc/stat file: "cpu" and the ticks spent in user,
// nice, system, idle, iowait, irq, softirq and steal (the guest times after them are counted
// in user and nice already). Idle is idle and iowait.
func readCPUTimes(path string) (cpuTimes, error) {
	f, err := os.Open(path)
	if err != nil {
		return cpuTimes{}, fmt.Errorf("app: read the host's CPU times: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return cpuTimes{}, fmt.Errorf("app: read the host's CPU times from %s: %w", path, err)
	}
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("app: read the host's CPU times from %s: first line %q is not the cpu line", path, strings.TrimSpace(line))
	}
	var t cpuTimes
	for i, f := range fields[1:min(len(fields), 9)] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("app: read the host's CPU times from %s: field %d %q: %w", path, i+1, f, err)
		}
		t.total += n
		if i == 3 || i == 4 { // idle, iowait
			t.idle += n
		}
	}
	return t, nil
}
