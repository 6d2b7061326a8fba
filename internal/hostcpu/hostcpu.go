// Package hostcpu reads the machine's CPU times from Linux's /proc/stat, to tell how busy the
// machine was between two readings. The worker's yield to interactive runs decides on it and
// the benchmarks report it, so that both mean the same by busy.
package hostcpu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Path is where Linux reports the machine's CPU times.
const Path = "/proc/stat"

// Times are the machine's CPU times since boot, summed over its CPUs, in clock ticks.
type Times struct {
	// Busy is the time spent in user, nice, system, irq and softirq: the machine's own work.
	// Idle, iowait and steal (time another VM took) are not.
	Busy uint64
	// Total is the time in all eight: user, nice, system, idle, iowait, irq, softirq, steal.
	Total uint64
}

// BusyShareSince is the share of the time from prev to t the machine was busy; 0 when no
// time passed.
func (t Times) BusyShareSince(prev Times) float64 {
	if t.Total <= prev.Total || t.Busy < prev.Busy {
		return 0
	}
	return float64(t.Busy-prev.Busy) / float64(t.Total-prev.Total)
}

// Read reads the times in the first line of a /proc/stat file (Path): "cpu" and the ticks
// spent in user, nice, system, idle, iowait, irq, softirq and steal. The guest times after
// them are counted in user and nice already.
func Read(path string) (Times, error) {
	f, err := os.Open(path)
	if err != nil {
		return Times{}, fmt.Errorf("hostcpu: read the CPU times: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return Times{}, fmt.Errorf("hostcpu: read the CPU times from %s: %w", path, err)
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return Times{}, fmt.Errorf("hostcpu: read the CPU times from %s: first line %q is not the cpu line", path, strings.TrimSpace(line))
	}
	var t Times
	for i, field := range fields[1:9] {
		n, err := strconv.ParseUint(field, 10, 64)
		if err != nil {
			return Times{}, fmt.Errorf("hostcpu: read the CPU times from %s: field %d %q: %w", path, i+1, field, err)
		}
		t.Total += n
		if i < 3 || i == 5 || i == 6 { // user, nice, system, irq, softirq
			t.Busy += n
		}
	}
	return t, nil
}
