package app

import (
	"context"
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

// yieldFixture is one queue's activity slots and its lane's, on one load whose clock the
// test moves.
type yieldFixture struct {
	load  *interactiveLoad
	clock time.Time
	queue *yieldSlots
	lane  laneSlots
}

func newYieldFixture(hold time.Duration, slots, keep int) *yieldFixture {
	f := &yieldFixture{load: newInteractiveLoad(hold), clock: time.Unix(1_000_000, 0)}
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
