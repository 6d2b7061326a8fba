package app

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/worker"
)

// yieldHold is how long the queues keep yielding after the interactive lanes' last task
// ends: a run's tasks follow one another with a round trip to the server between them, and a
// person's next run often follows the last within a second or two.
const yieldHold = 2 * time.Second

// interactiveLoad is what the queues of one worker yield to (Options.YieldActivities): the
// tasks its interactive lanes have in hand. The lanes' slot suppliers (laneSlots) count the
// tasks; each queue's activity slot supplier (yieldSlots) issues fewer slots while any is in
// hand, or ended less than hold ago, once the host's CPU is seen busy meanwhile.
// One load per worker, across all its queues: the CPU the runs compete for is the host's.
type interactiveLoad struct {
	hold time.Duration
	now  func() time.Time
	// busy reports whether the host's CPU is busy (hostCPU.Busy). Where it is not, the
	// drives wait on something else (a model's API) and yielding would gain nothing.
	busy func() bool

	mu      sync.Mutex
	inHand  map[*worker.SlotPermit]struct{} // the lanes' permits with a task
	lastEnd time.Time                       // when the lanes' last task ended
	// yield is whether the queues yield in the current episode: the lanes' tasks from one
	// that came while none was in hand or held to the end of the hold after the last. It
	// turns on when the host is seen busy in the episode and stays on to its end, so that
	// the CPU the yield frees does not end the yield.
	yield   bool
	changed chan struct{} // closed and replaced at every change
}

func newInteractiveLoad(hold time.Duration, busy func() bool) *interactiveLoad {
	return &interactiveLoad{hold: hold, now: time.Now, busy: busy,
		inHand: make(map[*worker.SlotPermit]struct{}), changed: make(chan struct{})}
}

// held reports whether the lanes have a task in hand or ended their last one less than hold
// ago and, in the second case, until when. l.mu is held.
func (l *interactiveLoad) held() (bool, time.Time) {
	if len(l.inHand) > 0 {
		return true, time.Time{}
	}
	until := l.lastEnd.Add(l.hold)
	return l.now().Before(until), until
}

// yielding reports whether the queues yield now and, when they yield only for the hold,
// until when. l.mu is held.
func (l *interactiveLoad) yielding() (bool, time.Time) {
	held, until := l.held()
	if !held {
		return false, time.Time{}
	}
	if !l.yield && l.busy() {
		l.yield = true
	}
	return l.yield, until
}

// broadcast wakes every reservation waiting on l. l.mu is held.
func (l *interactiveLoad) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// laneSlots is the slot supplier of an interactive lane's workflow tasks, activities or local
// activities: its own supplier's slots, each task counted in load while it runs.
type laneSlots struct {
	worker.SlotSupplier
	load *interactiveLoad
}

func (s laneSlots) MarkSlotUsed(info worker.SlotMarkUsedInfo) {
	s.SlotSupplier.MarkSlotUsed(info)
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	if held, _ := s.load.held(); !held {
		s.load.yield = s.load.busy()
	}
	s.load.inHand[info.Permit()] = struct{}{}
	s.load.broadcast()
}

// ReleaseSlot ends the permit's task, if it had one: a slot reserved for a poll that brought
// nothing is released without ever being used.
func (s laneSlots) ReleaseSlot(info worker.SlotReleaseInfo) {
	s.load.mu.Lock()
	if _, ok := s.load.inHand[info.Permit()]; ok {
		delete(s.load.inHand, info.Permit())
		s.load.lastEnd = s.load.now()
		s.load.broadcast()
	}
	s.load.mu.Unlock()
	s.SlotSupplier.ReleaseSlot(info)
}

// yieldSlots is the activity slot supplier of a queue of a worker that yields to its
// interactive runs: it issues up to max slots, and no new one beyond keep while load says
// the lanes are busy. A slot already issued is never taken back: a running drive finishes.
type yieldSlots struct {
	max, keep int
	load      *interactiveLoad
	issued    int // guarded by load.mu
}

func (s *yieldSlots) limit() (int, time.Time) {
	if busy, until := s.load.yielding(); busy {
		return s.keep, until
	}
	return s.max, time.Time{}
}

func (s *yieldSlots) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	for {
		s.load.mu.Lock()
		limit, until := s.limit()
		if s.issued < limit {
			s.issued++
			s.load.mu.Unlock()
			return &worker.SlotPermit{}, nil
		}
		changed := s.load.changed
		s.load.mu.Unlock()
		// Only a released slot, a change of the lanes or the end of the hold frees one.
		var expired <-chan time.Time
		var timer *time.Timer
		if !until.IsZero() {
			timer = time.NewTimer(until.Sub(s.load.now()))
			expired = timer.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-expired:
		}
		if timer != nil {
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (s *yieldSlots) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	if limit, _ := s.limit(); s.issued >= limit {
		return nil
	}
	s.issued++
	return &worker.SlotPermit{}
}

func (s *yieldSlots) MarkSlotUsed(worker.SlotMarkUsedInfo) {}

func (s *yieldSlots) ReleaseSlot(worker.SlotReleaseInfo) {
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	s.issued--
	s.load.broadcast()
}

func (s *yieldSlots) MaxSlots() int { return s.max }

// sdkDefaultSlots is the Temporal SDK's number of slots of each kind a worker has when its
// options set none.
const sdkDefaultSlots = 1000

// yieldTuners returns the slot tuners of one queue's worker and of its interactive lane's
// when the worker yields to interactive runs: the queue issues activity slots by yieldSlots,
// the lane counts its workflow tasks, activities and local activities in load, and every
// other kind keeps the SDK's default.
func yieldTuners(load *interactiveLoad, activitySlots, keep, laneActivitySlots int) (queue, lane worker.WorkerTuner) {
	// Sessions are unused; their slots follow the activities', as the SDK's own tuner does.
	tuner := func(workflow, activity, local worker.SlotSupplier, sessions int) worker.WorkerTuner {
		t, _ := worker.NewCompositeTuner(worker.CompositeTunerOptions{ // never fails
			WorkflowSlotSupplier:        workflow,
			ActivitySlotSupplier:        activity,
			LocalActivitySlotSupplier:   local,
			NexusSlotSupplier:           fixedSlots(sdkDefaultSlots),
			SessionActivitySlotSupplier: fixedSlots(sessions),
		})
		return t
	}
	queue = tuner(fixedSlots(sdkDefaultSlots), &yieldSlots{max: activitySlots, keep: keep, load: load}, fixedSlots(sdkDefaultSlots), activitySlots)
	lane = tuner(laneSlots{fixedSlots(sdkDefaultSlots), load}, laneSlots{fixedSlots(laneActivitySlots), load},
		laneSlots{fixedSlots(sdkDefaultSlots), load}, laneActivitySlots)
	return queue, lane
}

// fixedSlots is the SDK's supplier of n slots, n > 0 (the only case it refuses is n <= 0).
func fixedSlots(n int) worker.SlotSupplier {
	s, _ := worker.NewFixedSizeSlotSupplier(max(n, 1))
	return s
}
