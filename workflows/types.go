package workflows

import (
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// TaskQueue is the default task queue of workers and starters (contract R-80).
const TaskQueue = "subflow"

// WorkflowName is the registered name of StartSubagent.
const WorkflowName = "StartSubagent"

// Activity names. Workers register the implementations in package activities under these
// names; the workflow calls them by name only.
const (
	ActivityCreateRootSession = "CreateRootSession"
	ActivityPublish           = "Publish"
	ActivityDrive             = "Drive"
	ActivityReadResult        = "ReadResult"
	ActivityRunSDKChild       = "RunSDKChild"
)

// Message names of StartSubagent.
const (
	// UpdatePublished completes with Published once the child is published, or fails with
	// the rejection (validation message, or cancellation before publish). Start sends it
	// with Update-with-Start.
	UpdatePublished = "published"
	// QueryStatus returns a Status.
	QueryStatus = "status"
	// SignalSDKPublished is sent by RunSDKChild to its own workflow, with a Published
	// payload, once the child process completed its handshake.
	SignalSDKPublished = "sdk-published"
)

// StartInput is the input of StartSubagent.
type StartInput struct {
	// Provider names the subagent provider: one of the table of package subagent (spawn,
	// fork, sdk).
	Provider string `json:"provider"`
	// Request is the delegation. When Request.Parent.SessionID is empty, Root must be set.
	Request subagent.Request `json:"request"`
	// Root describes the depth-0 parent session the workflow creates first when the request
	// has no parent session (contract R-82).
	Root *RootSession `json:"root,omitempty"`
	// ChildID, when set, is the child id to use; when empty the workflow generates one.
	ChildID string `json:"childId,omitempty"`
	// Batch, when set, is upserted as the SubagentBatch search attribute.
	Batch string `json:"batch,omitempty"`
	// Timeout, when positive, is the run's deadline, counted from the workflow's start: when
	// it passes, the drive is cancelled as a cancel of the workflow would, the child ends
	// aborted with its partial answer, and the run completes with that outcome.
	Timeout Duration `json:"timeout,omitempty"`
	// timeoutGiven records a timeout present in the decoded JSON, so that a given zero is
	// refused (CheckInput) rather than read as none.
	timeoutGiven bool
}

// Cwd is the directory the run works in, read from the one place the input stores it: the
// root session's (Root.Cwd) when the workflow creates one, else the request's parent cwd (""
// means the parent session's own).
func (in StartInput) Cwd() string {
	if in.isRoot() && in.Root.Cwd != "" {
		return in.Root.Cwd
	}
	return in.Request.Parent.Cwd
}

// Route is the route the run's child asks for, as far as the input says: for a root run the
// root session's route (Root.Route) overridden field by field by the request's agentOptions,
// else the request's agentOptions alone (the parent session's route fills the rest).
func (in StartInput) Route() session.Route {
	if in.isRoot() {
		return in.Root.Route.Override(in.Request.AgentOptions)
	}
	return in.Request.AgentOptions
}

// isRoot reports whether the workflow creates the run's parent session (contract R-82).
func (in StartInput) isRoot() bool { return in.Root != nil && in.Request.Parent.SessionID == "" }

// RootSession is what CreateRootSession needs to create a root parent session.
type RootSession struct {
	Cwd    string        `json:"cwd"`
	Route  session.Route `json:"route,omitzero"`
	Preset string        `json:"preset,omitempty"`
}

// CreateRootSessionInput is the input of CreateRootSession. SessionID is RootSessionID of the
// child, so a retried call must create the session only if it is absent. The activity
// returns the subagent.ParentRef of the session (its id and resolved absolute cwd).
type CreateRootSessionInput struct {
	SessionID string `json:"sessionId"`
	// ChildID is the child the root is created for (SessionID is RootSessionID of it): a
	// root that another run created is refused naming it (RuleChildIDTaken).
	ChildID string      `json:"childId,omitempty"`
	Root    RootSession `json:"root"`
	// Owner is the run the root is created for (RunOwner): the session records it, and a
	// root another run owns is refused.
	Owner string `json:"owner,omitempty"`
	// Provider and Request, when Request is set, are the delegation the root is created
	// for: the activity makes the checks Publish would make against the new root before it
	// creates it, so a request Publish would reject leaves no root session behind.
	Provider string            `json:"provider,omitempty"`
	Request  *subagent.Request `json:"request,omitempty"`
	// RequestRef, when set, names the whole request, stored because it is big (see
	// PayloadThreshold); Request then lacks its big fields (prompt, schema, persona) but
	// carries the current parent.
	RequestRef *PayloadRef `json:"requestRef,omitempty"`
}

// ChildInput is the input of Publish and of Drive: the same child, first created (if absent)
// and published for Request, resolving its depth from the stored parent, then driven through
// its one turn, resuming from the session store on retries.
type ChildInput struct {
	Provider string           `json:"provider"`
	ChildID  string           `json:"childId"`
	Request  subagent.Request `json:"request"`
	// RequestRef, when set, names the whole request, stored because it is big (see
	// PayloadThreshold); Request then lacks its big fields (prompt, schema, persona) but
	// carries the current parent.
	RequestRef *PayloadRef `json:"requestRef,omitempty"`
	// Owner is the run the child is published for (RunOwner): Publish records it in the
	// child's session and refuses a session another run owns.
	Owner string `json:"owner,omitempty"`
}

// Published is what the caller learns at publication (contract R-71): the result of Publish,
// of the published update, and the payload of the sdk-published signal. RunID is the
// workflow run id; the workflow sets RunID and ChildID itself, whatever the activity or
// signal said.
type Published struct {
	RunID   string `json:"runId"`
	ChildID string `json:"childId"`
	Depth   int64  `json:"depth"`
	// Model is the child's resolved model when the publisher knows it; it fills the
	// SubagentModel search attribute when the request did not name one.
	Model string `json:"model,omitempty"`
}

// DriveSummary is the small result of Drive.
type DriveSummary struct {
	Steps         int   `json:"steps"`
	StreamedBytes int64 `json:"streamedBytes"`
	OutputTokens  int64 `json:"outputTokens"`
	// Delegations are the subagent tool calls the drive deferred to the workflow, which runs
	// them as child workflows: the child's turn is pending until their results are stored.
	Delegations []Delegation `json:"delegations,omitempty"`
}

// ReadResultInput is the input of ReadResult. Cancelled says the drive was cancelled: a
// child whose turn has no end (or never started) is then recorded as ended `aborted`, cause
// parent (contract R-72), before its result is read.
type ReadResultInput struct {
	ChildID   string           `json:"childId"`
	Request   subagent.Request `json:"request"`
	Cancelled bool             `json:"cancelled,omitempty"`
	// RequestRef, when set, names the whole request, stored because it is big (see
	// PayloadThreshold); Request then lacks its big fields (prompt, schema, persona) but
	// carries the current parent.
	RequestRef *PayloadRef `json:"requestRef,omitempty"`
}

// SDKInput is the input of RunSDKChild. RunID is the child id chosen by the workflow;
// WorkflowID is the activity's own workflow, which it signals with SignalSDKPublished.
type SDKInput struct {
	Provider   string           `json:"provider"`
	RunID      string           `json:"runId"`
	Request    subagent.Request `json:"request"`
	WorkflowID string           `json:"workflowId"`
	// RequestRef, when set, names the whole request, stored because it is big (see
	// PayloadThreshold); Request then lacks its big fields (prompt, schema, persona) but
	// carries the current parent.
	RequestRef *PayloadRef `json:"requestRef,omitempty"`
}

// Outcome is the result of ReadResult, of RunSDKChild and of StartSubagent, and the details
// of a Canceled StartSubagent.
type Outcome struct {
	ChildID string          `json:"childId"`
	Depth   int64           `json:"depth"`
	Result  subagent.Result `json:"result"`
	// ResultRef, when set, says the result was too big to travel inline (PayloadThreshold):
	// Result holds only the stop reason, and subflow.ResolveOutcome fetches the rest.
	ResultRef *PayloadRef `json:"resultRef,omitempty"`
	// Usage is the tokens the child's turn used, summed over its model requests.
	Usage session.Usage `json:"usage,omitzero"`
	// EndMessage is the first line of the error that ended the child's turn, when one did
	// (a run that ends error says why here): the digest's, so set only at the worker's full
	// digest level, which decides how much of a turn Temporal shows.
	EndMessage string `json:"endMessage,omitempty"`
	// Digest is what the child did (docs/digest.md), as ReadResult and RunSDKChild return
	// it; nil when the worker's digest level is off. StartSubagent moves it into its status
	// and Current Details, so its own result and a Canceled run's details never carry it:
	// the history holds it once.
	Digest *subagent.Digest `json:"digest,omitempty"`
}

// Progress is the heartbeat detail of Drive and RunSDKChild: subagent.Progress, the one
// progress type of the drivers, the activities and the status.
type Progress = subagent.Progress

// Phase is where a run stands.
type Phase string

// Phases, in order; a run ends in PhaseCompleted, PhaseCancelled or PhaseFailed.
const (
	PhaseValidating   Phase = "validating"
	PhaseCreatingRoot Phase = "creating-root"
	PhasePublishing   Phase = "publishing"
	PhaseDriving      Phase = "driving"
	// PhaseDelegating: the child's turn waits for the nested runs (child workflows) its
	// subagent tool calls started.
	PhaseDelegating Phase = "delegating"
	PhaseReading    Phase = "reading"
	PhaseCompleted  Phase = "completed"
	PhaseCancelled  Phase = "cancelled"
	PhaseFailed     Phase = "failed"
)

// Status is the answer to QueryStatus (contract R-75).
//
// The workflow cannot see activity heartbeats, so live progress is not part of the query:
// Summary is the last known DriveSummary (set once Drive returns). Describe fills Progress
// from the pending Drive or RunSDKChild activity's heartbeat details.
type Status struct {
	Phase      Phase               `json:"phase"`
	Provider   string              `json:"provider"`
	Label      string              `json:"label,omitempty"`
	Parent     string              `json:"parent,omitempty"`
	ChildID    string              `json:"childId,omitempty"`
	Depth      int64               `json:"depth,omitempty"`
	Summary    *DriveSummary       `json:"summary,omitempty"`
	StopReason subagent.StopReason `json:"stopReason,omitempty"`
	// Error is the rejection or failure message of a failed run.
	Error string `json:"error,omitempty"`
	// Priority is the run's task-queue priority and fairness; nil when it has none.
	Priority *Priority `json:"priority,omitempty"`
	// Digest is what the child did (docs/digest.md), once its result was read; the run's
	// Current Details show it as Markdown.
	Digest *subagent.Digest `json:"digest,omitempty"`
	// Progress is filled by Describe, never by the workflow.
	Progress *Progress `json:"progress,omitempty"`
}
