package workflows

import (
	"fmt"
	"maps"
	"slices"

	"time"

	"go.temporal.io/sdk/workflow"
)

// AdmissionWorkflowName is the registered name of ModelAdmission.
const AdmissionWorkflowName = "ModelAdmission"

// Messages of ModelAdmission.
const (
	// UpdateAcquire waits for a permit and answers with its id (a string).
	UpdateAcquire = "acquire"
	// SignalRelease gives a permit back (its id); releasing an unknown or expired permit is
	// not an error. A signal, not an update: the server admits only a few in-flight updates
	// per workflow (10 by default), all of which may be acquires waiting for a permit, and a
	// release must always get through.
	SignalRelease = "release"
)

// DefaultPermitTTL is how long a permit lasts when AdmissionInput.PermitTTL is 0: a worker
// that dies holding one gives it back this late. It exceeds any one model request.
const DefaultPermitTTL = 15 * time.Minute

// admissionMaxEvents is the history length past which ModelAdmission continues as new.
const admissionMaxEvents = 5000

// AdmissionWorkflowID is the id of the ModelAdmission of a model provider: one per provider
// and namespace, shared by every worker.
func AdmissionWorkflowID(provider string) string { return "subflow-admission-" + provider }

// AdmissionInput is the input of ModelAdmission.
type AdmissionInput struct {
	Provider string `json:"provider"`
	// Limit is the most permits out at once (concurrent model requests to Provider).
	Limit int `json:"limit"`
	// PermitTTL bounds a permit's life; 0 means DefaultPermitTTL.
	PermitTTL time.Duration `json:"permitTtl,omitempty"`
	// RequestsPerMinute, when above 0, also caps the permits granted in any 60 seconds
	// (a provider's requests-per-minute quota); 0 means no such cap.
	RequestsPerMinute int `json:"requestsPerMinute,omitempty"`
	// Permits are the permits out, by id, with their expiry; set when continuing as new.
	Permits map[string]time.Time `json:"permits,omitempty"`
	// Granted are the grant times of the last minute, oldest first, when RequestsPerMinute
	// is set; carried when continuing as new.
	Granted []time.Time `json:"granted,omitempty"`
	// BuildHeld is why the chain stays on its build though the deployment's current version
	// is another (its workers do not poll); carried when continuing as new.
	BuildHeld string `json:"buildHeld,omitempty"`
}

// ModelAdmission keeps the number of concurrent model requests to one provider under Limit
// across every worker: a request first acquires a permit by Update (UpdateAcquire, which
// completes when a permit is free, first come first served among the waiting updates) and
// releases it after (SignalRelease). The server caps the in-flight updates of a workflow
// (history.maxInFlightUpdates, 10 by default): acquires beyond that are refused and sent
// again by the caller. A permit expires after PermitTTL, so a worker that died holding one cannot
// shrink the limit for good. The workflow runs forever; it continues as new when its
// history grows or a new build of its deployment becomes current, once no acquire is waiting
// (new acquires are refused meanwhile and the caller sends them again).
func ModelAdmission(ctx workflow.Context, in AdmissionInput) error {
	if in.Limit < 1 {
		return fmt.Errorf("admission %s: limit must be at least 1: %d", in.Provider, in.Limit)
	}
	ttl := in.PermitTTL
	if ttl <= 0 {
		ttl = DefaultPermitTTL
	}
	permits := in.Permits
	if permits == nil {
		permits = map[string]time.Time{}
	}
	granted := in.Granted
	var queue []string
	draining := false
	build := buildMove{Held: in.BuildHeld}
	// rateWait is how long until one more grant fits the requests-per-minute cap; 0 when it
	// fits now (always, without a cap).
	rateWait := func() time.Duration {
		if in.RequestsPerMinute <= 0 {
			return 0
		}
		now := workflow.Now(ctx)
		for len(granted) > 0 && !now.Before(granted[0].Add(time.Minute)) {
			granted = granted[1:]
		}
		if len(granted) < in.RequestsPerMinute {
			return 0
		}
		return granted[0].Add(time.Minute).Sub(now)
	}
	expire := func() {
		now := workflow.Now(ctx)
		//workflowcheck:ignore deleting expired permits issues no command; the order is irrelevant
		for id, until := range permits {
			if now.After(until) {
				delete(permits, id)
			}
		}
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAcquire, func(ctx workflow.Context) (string, error) {
		id := workflow.GetCurrentUpdateInfo(ctx).ID
		queue = append(queue, id)
		for {
			if err := workflow.Await(ctx, func() bool { return queue[0] == id && len(permits) < in.Limit }); err != nil {
				return "", err
			}
			// Without a requests-per-minute cap this never waits, so the histories of
			// admissions without one replay unchanged.
			wait := rateWait()
			if wait <= 0 {
				break
			}
			if err := workflow.Sleep(ctx, wait); err != nil {
				return "", err
			}
		}
		queue = queue[1:]
		permits[id] = workflow.Now(ctx).Add(ttl)
		if in.RequestsPerMinute > 0 {
			granted = append(granted, workflow.Now(ctx))
		}
		return id, nil
	}, workflow.UpdateHandlerOptions{
		Validator: func(workflow.Context) error {
			if draining {
				return fmt.Errorf("admission %s: continuing as new; acquire again", in.Provider)
			}
			return nil
		},
		Description: "wait for a permit for one model request",
	})
	if err != nil {
		return err
	}
	err = workflow.SetQueryHandler(ctx, QueryProgress, func() (map[string]int, error) {
		return map[string]int{"limit": in.Limit, "out": len(permits), "waiting": len(queue), "requestsPerMinute": in.RequestsPerMinute}, nil
	})
	if err != nil {
		return err
	}
	releases := workflow.GetSignalChannel(ctx, SignalRelease)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var id string
			releases.Receive(ctx, &id)
			delete(permits, id)
		}
	})
	for {
		// Wake up now and then to expire permits (releases and acquires need no loop), and
		// on the first workflow task that says a new build is current.
		_, _ = workflow.AwaitWithTimeout(ctx, ttl/4, func() bool { return build.pending(ctx) })
		expire()
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() > admissionMaxEvents || info.GetContinueAsNewSuggested() || build.move(ctx) {
			draining = true
			// The waiting acquires are served by the releases still coming in.
			behavior := build.settle(ctx, ctx, func() bool { return len(queue) == 0 && workflow.AllHandlersFinished(ctx) })
			var id string
			for releases.ReceiveAsync(&id) {
				delete(permits, id)
			}
			next := in
			next.Permits = maps.Clone(permits)
			next.Granted = slices.Clone(granted)
			next.BuildHeld = build.Held
			return continueAsNew(ctx, behavior, AdmissionWorkflowName, next)
		}
	}
}
