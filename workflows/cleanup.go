package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Retention cleanup (docs/durability.md): what subflow stores outside Temporal — sessions,
// their event logs and leases, stored payloads and requests, batch pages — is removed once
// Temporal no longer keeps any run that owns it. The store records each session's owners
// (session.Retainer); the Cleanup workflow walks the store in pages of CleanupPageSize
// sessions whose owners were all recorded before its cutoff, and the CleanupPage activity
// removes a session only after Temporal says every owner is gone or closed before the cutoff.
// A running run, a run still within retention, a running batch and a parent whose child runs
// are owners Temporal still keeps, so what they read stays.
//
// The walk's cursor and totals live in the workflow, which continues as new every
// CleanupPagesPerRun pages: a worker killed mid-page has the page finished by the activity's
// retry, from the plan the page recorded in its heartbeat (so the totals count what either
// attempt removed), and a cleanup terminated mid-way leaves the rest to the next one, which
// walks the store from its start again.
const (
	// CleanupWorkflowName is the registered name of Cleanup.
	CleanupWorkflowName = "SubflowCleanup"
	// CleanupScheduleID is the id of the Schedule that runs Cleanup on a task queue
	// (suffixed with the queue), and the prefix of every workflow id a cleanup runs under.
	CleanupScheduleID = "subflow-gc"
	// CleanupManualWorkflowID is the id of a cleanup run now (`starter gc`).
	CleanupManualWorkflowID = "subflow-gc-now"
	// CleanupPageSize is how many sessions one CleanupPage checks.
	CleanupPageSize = 200
	// CleanupPagesPerRun is how many pages a Cleanup run walks before it continues as new.
	CleanupPagesPerRun = 50
)

// Names of the cleanup activities.
const (
	ActivityCleanupCutoff = "CleanupCutoff"
	ActivityCleanupPage   = "CleanupPage"
)

// HiddenDivision is the TemporalNamespaceDivision of the workflows subflow runs for itself
// (payload fetches, cleanups): Temporal's visibility leaves workflows with a division out of
// every list whose query does not name one, the Web UI's default list included, as it does
// for its own schedulers and batchers. List them with
// `TemporalNamespaceDivision = "subflow"`.
const HiddenDivision = "subflow"

// HiddenDivisionKey is the search attribute holding HiddenDivision.
var HiddenDivisionKey = temporal.NewSearchAttributeKeyKeyword("TemporalNamespaceDivision")

// CleanupInput is the input of Cleanup; the zero value cleans what the namespace's retention
// (or the worker's shorter --retention) no longer keeps.
type CleanupInput struct {
	// OlderThan, when positive, replaces the retention: stored data of runs closed more than
	// OlderThan ago, or gone from Temporal, is removed.
	OlderThan time.Duration `json:"olderThan,omitempty"`
	// DryRun removes nothing and reports what would be removed.
	DryRun bool `json:"dryRun,omitempty"`
	// PageSize is the sessions per page; 0 means CleanupPageSize.
	PageSize int `json:"pageSize,omitempty"`

	// Set when the run continues as new: where the walk is and what it did so far.
	Cutoff time.Time      `json:"cutoff,omitzero"`
	Cursor string         `json:"cursor,omitempty"`
	Totals *CleanupResult `json:"totals,omitempty"`
}

// CleanupCutoffInput is the input of CleanupCutoff.
type CleanupCutoffInput struct {
	OlderThan time.Duration `json:"olderThan,omitempty"`
}

// CleanupCutoff is the retention a cleanup applies and the cutoff it computes from it: now
// minus the retention. Retention 0 (a namespace that keeps runs forever) removes nothing.
type CleanupCutoff struct {
	Retention time.Duration `json:"retention"`
	// Source says where the retention comes from: "namespace", "worker" or "older-than".
	Source string    `json:"source"`
	Cutoff time.Time `json:"cutoff,omitzero"`
}

// CleanupPageInput is the input of CleanupPage: check the sessions after After whose owners
// were all recorded before Cutoff, at most Limit of them.
type CleanupPageInput struct {
	After  string    `json:"after,omitempty"`
	Cutoff time.Time `json:"cutoff"`
	Limit  int       `json:"limit"`
	DryRun bool      `json:"dryRun,omitempty"`
}

// CleanupPageOutput is what CleanupPage did to one page.
type CleanupPageOutput struct {
	// Next is the cursor of the next page; Done is set when this page was the last.
	Next string `json:"next,omitempty"`
	Done bool   `json:"done,omitempty"`
	CleanupCounts
}

// CleanupCounts counts what a cleanup checked, kept and removed (or, in a dry run, would
// remove), by kind of stored data.
type CleanupCounts struct {
	// Checked is the sessions old enough to check; Kept those an owner Temporal still keeps
	// holds (or that a run started to use while they were checked).
	Checked int `json:"checked"`
	Kept    int `json:"kept"`
	// Removed maps a kind ("session", "payload", "request", "batch-page") to what went.
	Removed map[string]CleanupKind `json:"removed,omitempty"`
}

// CleanupKind is the number and the size in bytes of the removed items of one kind.
type CleanupKind struct {
	Items int   `json:"items"`
	Bytes int64 `json:"bytes"`
}

// Add adds o to c.
func (c *CleanupCounts) Add(o CleanupCounts) {
	c.Checked += o.Checked
	c.Kept += o.Kept
	//workflowcheck:ignore sums into a map; no command depends on the order
	for kind, k := range o.Removed {
		if c.Removed == nil {
			c.Removed = map[string]CleanupKind{}
		}
		sum := c.Removed[kind]
		sum.Items += k.Items
		sum.Bytes += k.Bytes
		c.Removed[kind] = sum
	}
}

// Total is the number and size of every removed item.
func (c CleanupCounts) Total() CleanupKind {
	var t CleanupKind
	//workflowcheck:ignore a sum; the order is irrelevant
	for _, k := range c.Removed {
		t.Items += k.Items
		t.Bytes += k.Bytes
	}
	return t
}

// CleanupResult is the result of Cleanup.
type CleanupResult struct {
	CleanupCutoff
	DryRun bool `json:"dryRun,omitempty"`
	CleanupCounts
	// Runs is the Cleanup runs the walk took (1 + its continues-as-new).
	Runs int `json:"runs"`
}

// Cleanup removes the stored data no run Temporal keeps owns any more (see the comment at the
// top of this file).
func Cleanup(ctx workflow.Context, in CleanupInput) (CleanupResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    HeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	res := CleanupResult{DryRun: in.DryRun}
	if in.Totals != nil {
		res = *in.Totals
	}
	res.Runs++
	if in.Cutoff.IsZero() {
		cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: ShortTimeout})
		err := workflow.ExecuteActivity(cctx, ActivityCleanupCutoff, CleanupCutoffInput{OlderThan: in.OlderThan}).Get(ctx, &res.CleanupCutoff)
		if err != nil {
			return res, err
		}
		if res.Cutoff.IsZero() {
			return res, nil // retention is infinite: nothing is ever old enough
		}
		in.Cutoff = res.Cutoff
	}
	limit := in.PageSize
	if limit <= 0 {
		limit = CleanupPageSize
	}
	for range CleanupPagesPerRun {
		var page CleanupPageOutput
		err := workflow.ExecuteActivity(ctx, ActivityCleanupPage, CleanupPageInput{
			After: in.Cursor, Cutoff: in.Cutoff, Limit: limit, DryRun: in.DryRun,
		}).Get(ctx, &page)
		if err != nil {
			return res, err
		}
		res.Add(page.CleanupCounts)
		if page.Done {
			return res, nil
		}
		in.Cursor = page.Next
	}
	in.Totals = &res
	var build buildMove
	return res, continueAsNew(ctx, build.behavior(ctx), CleanupWorkflowName, in)
}
