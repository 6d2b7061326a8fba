// Package admission admits the model requests of a worker through the ModelAdmission workflow
// of each limited provider (workflows.ModelAdmission), so a provider's limits hold across every
// worker and batch of the namespace; a worker keeps the permits its requests gave back for a
// moment and hands them to its own next requests (permitpool.go). It knows Temporal's client,
// not the activities: the activities record each drive and wrap their models with it.
package admission

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/workflows"
)

// acquireRetry is the pause before an acquire refused while the limiter continues as new
// (or unreachable for a moment) is sent again.
const acquireRetry = 200 * time.Millisecond

// admitter admits model requests through the ModelAdmission workflow of each limited
// provider (see workflows.ModelAdmission): the limit holds across every worker and batch of
// the namespace.
type admitter struct {
	c         client.Client
	taskQueue string
	limits    map[string]int
	rpm       map[string]int
	limiters  *sync.Map // Admitter.limiters
}

// unlimitedConcurrency is the concurrency limit of a provider capped per minute only.
const unlimitedConcurrency = 1 << 30

// Admitter is what the admitted models of one worker share with its activities: the limits,
// the client and task queue of the limiters (known once a drive ran: activities get their
// client from their context), the wait callback of each running drive, by child id, and the
// worker's idle permits. Its methods are safe for concurrent use.
type Admitter struct {
	limits    map[string]int
	rpm       map[string]int
	taskQueue string // "" until a drive ran, unless configured
	mu        sync.Mutex
	c         client.Client
	drives    map[string]func(note string)
	// limiters are the limiter ids this worker saw a ModelAdmission answer under: the first
	// acquire of any other checks who holds the id first (squatter).
	limiters sync.Map
	pools    map[string]*permitPool // by provider (permitpool.go)
}

// New returns the Admitter of the limits: at most concurrency[p] requests of provider p at
// once, and at most requestsPerMinute[p] granted in any 60 seconds, cluster-wide, through the
// ModelAdmission workflows on taskQueue ("" means the queue of the first drive recorded). A
// provider named in neither map is not limited; with no provider named New returns nil, nil.
// A limit below 1 is an error naming the provider.
func New(concurrency, requestsPerMinute map[string]int, taskQueue string) (*Admitter, error) {
	limits := map[string]int{}
	for provider, n := range concurrency {
		if n < 1 {
			return nil, fmt.Errorf("model concurrency of %s must be at least 1: %d", provider, n)
		}
		limits[provider] = n
	}
	for provider, n := range requestsPerMinute {
		if n < 1 {
			return nil, fmt.Errorf("model requests per minute of %s must be at least 1: %d", provider, n)
		}
		if _, ok := limits[provider]; !ok {
			limits[provider] = unlimitedConcurrency
		}
	}
	if len(limits) == 0 {
		return nil, nil
	}
	return &Admitter{limits: limits, rpm: requestsPerMinute, taskQueue: taskQueue, drives: map[string]func(string){}}, nil
}

// DriveStarted records the client and task queue of a drive (the first recorded serve every
// admitted model) and the callback that shows the waits of the drive's model requests,
// found by the child's session id; the returned function forgets the callback.
func (s *Admitter) DriveStarted(c client.Client, taskQueue, childID string, onWait func(note string)) (done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		s.c = c
	}
	if s.taskQueue == "" {
		s.taskQueue = taskQueue
	}
	s.drives[childID] = onWait
	return func() {
		s.mu.Lock()
		delete(s.drives, childID)
		s.mu.Unlock()
	}
}

// TaskQueue returns the task queue of the limiters: the configured one, else the first
// drive's; "" before either.
func (s *Admitter) TaskQueue() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taskQueue
}

// describe states the limits of provider, for the wait shown in a drive's progress.
func (s *Admitter) describe(provider string) string {
	var parts []string
	if n := s.limits[provider]; n != unlimitedConcurrency {
		parts = append(parts, fmt.Sprintf("at most %d requests at once", n))
	}
	if n := s.rpm[provider]; n > 0 {
		parts = append(parts, fmt.Sprintf("at most %d requests a minute", n))
	}
	return strings.Join(parts, ", ")
}

// admittedModel is a model whose requests go through the provider's cluster-wide admission
// (the HTTP adapters honour model.Admission; see model.WithAdmission).
type admittedModel struct {
	inner    model.Model
	provider string
	state    *Admitter
}

func (m *admittedModel) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	s := m.state
	s.mu.Lock()
	onWait, c, queue := s.drives[req.SessionID], s.c, s.taskQueue
	s.mu.Unlock()
	if onWait == nil {
		onWait = func(string) {}
	}
	adm := model.Admission{OnWait: onWait}
	if c != nil {
		adm.Admit = s.Admit(c, queue, onWait)
	}
	return m.inner.Stream(model.WithAdmission(ctx, adm), req, onText)
}

// Admit returns the model.Admission Admit of requests admitted through c by the limiters on
// queue: it waits for a permit of the provider (a reused one of this worker's, else a grant
// of its ModelAdmission, started if none runs) and returns the function that gives it back.
// The wait for a grant is shown through onWait, and "" once it ends.
func (s *Admitter) Admit(c client.Client, queue string, onWait func(string)) func(ctx context.Context, provider string) (func(), error) {
	ad := &admitter{c: c, taskQueue: queue, limits: s.limits, rpm: s.rpm, limiters: &s.limiters}
	return func(ctx context.Context, provider string) (func(), error) {
		pool := s.pool(ad, provider)
		if pool != nil {
			if h, ok := pool.take(time.Now()); ok {
				return func() { pool.put(h, time.Now()) }, nil
			}
		}
		onWait(fmt.Sprintf("waiting for rate limit: admission of %s (%s)", provider, s.describe(provider)))
		defer onWait("")
		id, err := ad.acquire(ctx, provider)
		if err != nil {
			return nil, err
		}
		if pool == nil {
			return func() { ad.release(workflows.AdmissionWorkflowID(provider), id) }, nil
		}
		h := heldPermit{id: id, granted: time.Now()}
		return func() { pool.put(h, time.Now()) }, nil
	}
}

// pool returns the worker's pool of idle permits of provider, made on first use with ad to
// give permits back; nil for a provider capped per minute, whose every request is a grant.
func (s *Admitter) pool(ad *admitter, provider string) *permitPool {
	if s.rpm[provider] > 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pools[provider]
	if p == nil {
		id := workflows.AdmissionWorkflowID(provider)
		p = &permitPool{giveBack: func(permit string) { ad.release(id, permit) }}
		if s.pools == nil {
			s.pools = map[string]*permitPool{}
		}
		s.pools[provider] = p
	}
	return p
}

// Limited returns the providers under a limit, sorted.
func (s *Admitter) Limited() []string {
	return slices.Sorted(maps.Keys(s.limits))
}

// Models returns models with the model of every limited provider wrapped so that its
// requests are admitted (see DriveStarted); the others are the same models.
func (s *Admitter) Models(models *model.Registry) *model.Registry {
	out := &model.Registry{}
	for _, name := range models.Providers() {
		m, err := models.Lookup(name)
		if err != nil {
			continue
		}
		if _, limited := s.limits[name]; limited {
			m = &admittedModel{inner: m, provider: name, state: s}
		}
		out.Register(name, m)
	}
	return out
}

// acquire waits for a permit of provider's limiter, starting the limiter if none runs, and
// returns its id.
func (ad *admitter) acquire(ctx context.Context, provider string) (string, error) {
	id := workflows.AdmissionWorkflowID(provider)
	if _, seen := ad.limiters.Load(id); !seen {
		if err := ad.squatter(ctx, id); err != nil {
			return "", err
		}
	}
	for {
		op := ad.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                ad.taskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			StaticSummary:            fmt.Sprintf("admission of %s model requests", provider),
		}, workflows.AdmissionWorkflowName, workflows.AdmissionInput{Provider: provider, Limit: ad.limits[provider], RequestsPerMinute: ad.rpm[provider]})
		actx, cancelAccept := context.WithTimeout(ctx, acceptTimeout)
		h, err := ad.c.UpdateWithStartWorkflow(actx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				WorkflowID:   id,
				UpdateName:   workflows.UpdateAcquire,
				WaitForStage: client.WorkflowUpdateStageAccepted,
			},
		})
		cancelAccept()
		var permit string
		if err == nil {
			err = h.Get(ctx, &permit)
			if err != nil && ctx.Err() != nil {
				// Granted later to nobody: give it back once granted.
				go ad.releaseWhenGranted(h)
			}
		}
		switch {
		case err == nil:
			ad.limiters.Store(id, true)
			return permit, nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		}
		if err := ad.squatter(ctx, id); err != nil {
			return "", err
		}
		// Refused (the server's cap on in-flight updates, or the limiter continuing as new)
		// or a transient error: again, after a jittered pause so waiting callers spread out.
		t := time.NewTimer(acquireRetry + time.Duration(rand.Int64N(int64(acquireRetry)*4)))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

func (ad *admitter) releaseWhenGranted(h client.WorkflowUpdateHandle) {
	ctx, cancel := context.WithTimeout(context.Background(), workflows.DefaultPermitTTL)
	defer cancel()
	var permit string
	if h.Get(ctx, &permit) == nil {
		ad.release(h.WorkflowID(), permit)
	}
}

// release gives a permit back; a permit whose release is lost expires after its TTL.
func (ad *admitter) release(workflowID, permit string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = ad.c.SignalWorkflow(ctx, workflowID, "", workflows.SignalRelease, permit)
}

// ReleasePermits gives back the idle permits this worker holds for reuse. Call it once the
// worker stopped (no drive runs any more), before the process exits.
func (s *Admitter) ReleasePermits() {
	s.mu.Lock()
	pools := slices.Collect(maps.Values(s.pools))
	s.mu.Unlock()
	for _, p := range pools {
		p.giveBackAll()
	}
}
