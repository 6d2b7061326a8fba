package activities

import (
	"context"

	"fmt"
	"math/rand/v2"
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
		ad := &admitter{c: c, taskQueue: queue, limits: s.limits, rpm: s.rpm, limiters: &s.limiters}
		adm.Admit = func(ctx context.Context, provider string) (func(), error) {
			onWait(fmt.Sprintf("waiting for rate limit: admission of %s (%s)", provider, s.describe(provider)))
			defer onWait("")
			return ad.acquire(ctx, provider)
		}
	}
	return m.inner.Stream(model.WithAdmission(ctx, adm), req, onText)
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
// returns the function that releases it.
func (ad *admitter) acquire(ctx context.Context, provider string) (func(), error) {
	id := workflows.AdmissionWorkflowID(provider)
	if _, seen := ad.limiters.Load(id); !seen {
		if err := ad.squatter(ctx, id); err != nil {
			return nil, err
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
			return func() { ad.release(id, permit) }, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		if err := ad.squatter(ctx, id); err != nil {
			return nil, err
		}
		// Refused (the server's cap on in-flight updates, or the limiter continuing as new)
		// or a transient error: again, after a jittered pause so waiting callers spread out.
		t := time.NewTimer(acquireRetry + time.Duration(rand.Int64N(int64(acquireRetry)*4)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
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
