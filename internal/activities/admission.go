package activities

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

	"github.com/subflow-dev/subflow/internal/harness/model"
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
	limiters  *sync.Map // admissionState.limiters
}

// unlimitedConcurrency is the concurrency limit of a provider capped per minute only.
const unlimitedConcurrency = 1 << 30

// admissionState is what the admitted models share with the activities: the client and
// task queue of the limiters (known once a drive ran: activities get their client from their
// context) and the progress of each running drive, by child id, to show waits in.
type admissionState struct {
	limits    map[string]int
	rpm       map[string]int
	taskQueue string // "" until a drive ran, unless configured
	mu        sync.Mutex
	c         client.Client
	drives    map[string]*progress
	// limiters are the limiter ids this worker saw a ModelAdmission answer under: the first
	// acquire of any other checks who holds the id first (squatter).
	limiters sync.Map
	pools    map[string]*permitPool // by provider (permitpool.go)
}

// driveStarted records the client and queue of a drive and its progress; the returned
// function forgets the progress.
func (s *admissionState) driveStarted(c client.Client, taskQueue, childID string, p *progress) (done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		s.c = c
	}
	if s.taskQueue == "" {
		s.taskQueue = taskQueue
	}
	s.drives[childID] = p
	return func() {
		s.mu.Lock()
		delete(s.drives, childID)
		s.mu.Unlock()
	}
}

// describe states the limits of provider, for the wait shown in a drive's progress.
func (s *admissionState) describe(provider string) string {
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
	state    *admissionState
}

func (m *admittedModel) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	s := m.state
	s.mu.Lock()
	p, c, queue := s.drives[req.SessionID], s.c, s.taskQueue
	s.mu.Unlock()
	onWait := func(string) {}
	if p != nil {
		onWait = p.setWait
	}
	adm := model.Admission{OnWait: onWait}
	if c != nil {
		adm.Admit = s.admit(c, queue, onWait)
	}
	return m.inner.Stream(model.WithAdmission(ctx, adm), req, onText)
}

// admit returns the model.Admission Admit of requests admitted through c by the limiters on
// queue; the wait for a permit is shown through onWait.
func (s *admissionState) admit(c client.Client, queue string, onWait func(string)) func(ctx context.Context, provider string) (func(), error) {
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
func (s *admissionState) pool(ad *admitter, provider string) *permitPool {
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

// limited returns the providers under a limit, sorted.
func (s *admissionState) limited() []string {
	return slices.Sorted(maps.Keys(s.limits))
}

// admittedRegistry returns models with every provider named in limits wrapped in an
// admittedModel; the others are the same.
func admittedRegistry(models *model.Registry, state *admissionState) *model.Registry {
	out := &model.Registry{}
	for _, name := range models.Providers() {
		m, err := models.Lookup(name)
		if err != nil {
			continue
		}
		if _, limited := state.limits[name]; limited {
			m = &admittedModel{inner: m, provider: name, state: state}
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

// ReleasePermits gives back the idle model-admission permits this worker holds for reuse.
// Call it once the worker stopped (no drive runs any more), before the process exits.
func (a *Activities) ReleasePermits() {
	if a.admission == nil {
		return
	}
	a.admission.mu.Lock()
	pools := slices.Collect(maps.Values(a.admission.pools))
	a.admission.mu.Unlock()
	for _, p := range pools {
		p.giveBackAll()
	}
}
