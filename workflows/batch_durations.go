package workflows

import (
	"math/bits"
	"time"
)

// Durations is a histogram of run durations in whole milliseconds with a bounded size
// whatever the number of runs, so a batch keeps it in its state and continues it across
// continue-as-new. Durations below 8 ms are exact; above, each power of two is split in 8
// buckets, so a percentile is within 1/16 (6.25%) of the true value. Integer arithmetic only:
// workflow code must compute the same on every machine.
type Durations struct {
	// Buckets counts the durations per bucket index.
	Buckets map[int]int `json:"buckets,omitempty"`
	Count   int         `json:"count"`
	MaxMs   int64       `json:"maxMs"`
}

// Add records d (negative counts as 0).
func (h *Durations) Add(d time.Duration) {
	ms := max(d.Milliseconds(), 0)
	if h.Buckets == nil {
		h.Buckets = make(map[int]int)
	}
	h.Buckets[bucketOf(ms)]++
	h.Count++
	h.MaxMs = max(h.MaxMs, ms)
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of the recorded durations: the
// middle of the bucket holding it, never more than the maximum. It is 0 without durations.
func (h Durations) Percentile(p int) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := (h.Count*p + 99) / 100 // the rank-th smallest, 1-based
	rank = min(max(rank, 1), h.Count)
	seen := 0
	for b := 0; ; b++ {
		seen += h.Buckets[b]
		if seen >= rank {
			lo, hi := bucketBounds(b)
			return time.Duration(min((lo+hi)/2, h.MaxMs)) * time.Millisecond
		}
	}
}

// bucketOf returns the bucket of ms: ms itself below 8, else 8 buckets per power of two.
func bucketOf(ms int64) int {
	if ms < 8 {
		return int(ms)
	}
	e := bits.Len64(uint64(ms)) - 1 // 2^e ≤ ms < 2^(e+1), e ≥ 3
	sub := int(ms>>(e-3)) & 7
	return 8*(e-2) + sub
}

// bucketBounds returns the smallest and largest millisecond value of bucket b.
func bucketBounds(b int) (lo, hi int64) {
	if b < 8 {
		return int64(b), int64(b)
	}
	e, sub := b/8+2, int64(b%8)
	lo = (8 + sub) << (e - 3)
	return lo, lo + 1<<(e-3) - 1
}
