package app

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// slotInfo is the SDK's view of a slot as the suppliers' caller passes it, for reserving
// (slotInfo{}), marking used and releasing: only the permit matters to the suppliers here.
type slotInfo struct {
	worker.SlotReleaseInfo // with Permit, also a worker.SlotMarkUsedInfo
	permit                 *worker.SlotPermit
}

func (i slotInfo) Permit() *worker.SlotPermit { return i.permit }

// yieldFixture is one queue's activity slots and its lane's, on one load whose clock and
// host CPU (busy unless the test says otherwise) the test sets.
type yieldFixture struct {
	load  *interactiveLoad
	clock time.Time
	idle  bool // the host's CPU is not busy
	queue *yieldSlots
	lane  laneSlots
}

func newYieldFixture(hold time.Duration, slots, keep int) *yieldFixture {
	f := &yieldFixture{clock: time.Unix(1_000_000, 0)}
	f.load = newInteractiveLoad(hold, func() bool { return !f.idle })
	f.load.now = func() time.Time { return f.clock }
	f.queue = &yieldSlots{max: slots, keep: keep, load: f.load}
	f.lane = laneSlots{fixedSlots(4), f.load}
	return f
}

// reserveQueue takes every queue slot TryReserveSlot gives and returns them.
func (f *yieldFixture) reserveQueue() []*worker.SlotPermit {
	var permits []*worker.SlotPermit
	for {
		p := f.queue.TryReserveSlot(nil)
		if p == nil {
			return permits
		}
		permits = append(permits, p)
	}
}

// laneTask reserves a lane slot and marks it used, as the SDK does for a polled task.
func (f *yieldFixture) laneTask(t *testing.T) *worker.SlotPermit {
	p, err := f.lane.ReserveSlot(context.Background(), nil)
	require.NoError(t, err)
	f.lane.MarkSlotUsed(slotInfo{permit: p})
	return p
}

// A queue issues all its slots while no interactive task is in hand, no new one beyond keep
// while one is, and all again once the lane has been idle for the hold; a slot it issued is
// never taken back.
func TestYieldKeepsQueueSlotsWhileInteractiveTaskInHand(t *testing.T) {
	f := newYieldFixture(2*time.Second, 8, 2)
	running := f.reserveQueue()
	require.Len(t, running, 8, "no interactive task: every slot")

	task := f.laneTask(t)
	for len(running) > 2 {
		f.queue.ReleaseSlot(slotInfo{permit: running[0]})
		running = running[1:]
		assert.Empty(t, f.reserveQueue(), "a freed slot is not reissued while %d run and the lane is busy", len(running))
	}
	f.queue.ReleaseSlot(slotInfo{permit: running[0]})
	running = running[1:]
	got := f.reserveQueue()
	assert.Len(t, got, 1, "under keep, the queue refills to keep")
	running = append(running, got...)

	f.lane.ReleaseSlot(slotInfo{permit: task})
	f.clock = f.clock.Add(2*time.Second - time.Millisecond)
	assert.Empty(t, f.reserveQueue(), "within the hold after the lane's last task, the queue still yields")
	f.clock = f.clock.Add(time.Millisecond)
	assert.Len(t, f.reserveQueue(), 6, "after the hold, every slot")
}

// The queues yield from the moment the host's CPU is seen busy while an interactive task is
// in hand (or held), to the end of the hold, though the CPU the yield frees leaves the host
// idle; a run of tasks on an idle host does not make them yield.
func TestYieldOnlyWhenHostBusy(t *testing.T) {
	f := newYieldFixture(2*time.Second, 4, 1)
	yielding := func() bool {
		f.load.mu.Lock()
		defer f.load.mu.Unlock()
		busy, _ := f.load.yielding()
		return busy
	}
	f.idle = true
	task := f.laneTask(t)
	running := f.reserveQueue()
	assert.Len(t, running, 4, "the host's CPU is idle: every slot")

	f.idle = false
	assert.True(t, yielding(), "the host seen busy while the task is in hand")
	f.idle = true
	assert.True(t, yielding(), "the host idle again (what the yield freed): the queues still yield")
	f.lane.ReleaseSlot(slotInfo{permit: task})
	f.clock = f.clock.Add(time.Second)
	assert.True(t, yielding(), "within the hold")

	f.clock = f.clock.Add(time.Second)
	assert.False(t, yielding(), "the hold over")
	f.laneTask(t)
	assert.False(t, yielding(), "a new task on an idle host")
	for _, p := range running {
		f.queue.ReleaseSlot(slotInfo{permit: p})
	}
	assert.Len(t, f.reserveQueue(), 4)
}

// A lane slot reserved for a poll that brought no task does not make the queues yield.
func TestYieldIgnoresLaneSlotsNeverUsed(t *testing.T) {
	f := newYieldFixture(2*time.Second, 3, 1)
	p, err := f.lane.ReserveSlot(context.Background(), nil)
	require.NoError(t, err)
	assert.Len(t, f.reserveQueue(), 3)
	f.lane.ReleaseSlot(slotInfo{permit: p})
	f.load.mu.Lock()
	busy, _ := f.load.yielding()
	f.load.mu.Unlock()
	assert.False(t, busy, "an unused lane slot released starts no hold")
}

// ReserveSlot waits while the queue yields and returns once the lane's task ends (here with
// no hold), and returns the context's error when cancelled first.
func TestYieldReserveWaitsForTheLane(t *testing.T) {
	f := newYieldFixture(0, 2, 1)
	require.NotNil(t, f.queue.TryReserveSlot(nil))
	task := f.laneTask(t)

	got := make(chan error, 1)
	go func() {
		_, err := f.queue.ReserveSlot(context.Background(), nil)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("ReserveSlot returned (%v) while the lane had a task in hand and keep was issued", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.lane.ReleaseSlot(slotInfo{permit: task})
	require.NoError(t, <-got)

	ctx, cancel := context.WithCancel(context.Background())
	f.laneTask(t)
	go func() {
		_, err := f.queue.ReserveSlot(ctx, nil)
		got <- err
	}()
	cancel()
	assert.ErrorIs(t, <-got, context.Canceled)
}

// YieldAuto keeps as many activities as the worker may use CPUs, at most one fewer than the
// worker's slots, and never yields with one slot.
func TestAutoYield(t *testing.T) {
	cpus := runtime.GOMAXPROCS(0)
	assert.Equal(t, cpus, autoYield(0), "the SDK's 1000 slots")
	assert.Equal(t, min(cpus, 1), autoYield(2))
	assert.Zero(t, autoYield(1))
	opts, err := Options{MaxConcurrentActivities: 1, YieldActivities: YieldAuto}.withDefaults()
	require.NoError(t, err)
	assert.Zero(t, opts.YieldActivities)
	opts, err = Options{MaxConcurrentActivities: 8, YieldActivities: YieldAuto}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, min(cpus, 7), opts.YieldActivities)
}

// --yield-activities reads auto as YieldAuto and a count as itself, refuses anything else,
// and says back what it read.
func TestYieldFlag(t *testing.T) {
	n := 0
	f := YieldFlag(&n)
	require.NoError(t, f.Set("auto"))
	assert.Equal(t, YieldAuto, n)
	assert.Equal(t, "auto", f.String())
	require.NoError(t, f.Set("3"))
	assert.Equal(t, 3, n)
	assert.Equal(t, "3", f.String())
	for _, bad := range []string{"-1", "many", ""} {
		assert.ErrorContains(t, f.Set(bad), "want a count of 0 or more, or auto", "%q", bad)
	}
	assert.Equal(t, 3, n, "a refused value changes nothing")
}
