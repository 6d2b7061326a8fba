package workflows

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/subagent"
)

// MaxSessionIDBytes is the longest session id a run accepts as its childId or its parent:
// far below a file name's 255 bytes (a session is a directory of the file store) and the
// server's workflow id limit, which subagent-<childId> must fit.
const MaxSessionIDBytes = 128

// CheckSessionID returns why id cannot name a session a run creates or delegates from, or
// "" when it can: the store's rules (session.ValidateID), then at most MaxSessionIDBytes of
// letters, digits, '.', '_' and '-', not starting with '-' or '.' (an id is a command-line
// argument and a directory name).
func CheckSessionID(id string) string {
	if err := session.ValidateID(id); err != nil {
		msg := err.Error() // the reason follows the quoted id, which may hold ": " itself
		return msg[strings.LastIndex(msg, ": ")+2:]
	}
	if len(id) > MaxSessionIDBytes {
		return fmt.Sprintf("%d bytes, over the limit of %d", len(id), MaxSessionIDBytes)
	}
	if id[0] == '-' || id[0] == '.' {
		return fmt.Sprintf("starts with %q", id[0])
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("contains %q: an id holds letters, digits, '.', '_' and '-'", r)
		}
	}
	return ""
}

// CheckInput makes every check of a StartSubagent input that needs no I/O, in the order the
// workflow makes them before it writes anything: the provider and the request
// (subagent.CheckStart), the childId and the parent session id (CheckSessionID), the
// timeout, the values the run carries as search attributes, and that the run has a parent or
// a root session to create. The workflow, subflow.Start and the starter all run it, so a
// starter refuses what the workflow would, before any workflow exists. Every failure is a
// *subagent.ValidationError whose message names the field.
func CheckInput(in StartInput) error {
	if err := subagent.CheckStart(in.Provider, in.Request); err != nil {
		return err
	}
	if in.ChildID != "" {
		if why := CheckSessionID(in.ChildID); why != "" {
			return subagent.Rejectf(RuleInvalidChildID, "subagent childId: invalid session id %q: %s", clip(in.ChildID), why)
		}
	}
	if p := in.Request.Parent.SessionID; p != "" {
		if why := CheckSessionID(p); why != "" {
			return subagent.Rejectf(RuleInvalidSessionID, "subagent parent session: invalid session id %q: %s", clip(p), why)
		}
	}
	if in.Timeout < 0 || in.Timeout == 0 && in.timeoutGiven {
		return subagent.Rejectf(RuleInvalidTimeout, "subagent timeout must be a positive duration such as \"90s\" or \"10m\" (leave it out for none): %s", in.Timeout)
	}
	for _, a := range []struct{ field, v string }{{"batch", in.Batch}, {"request.agentOptions.model", model(in)}} {
		if raw, _ := json.Marshal(a.v); len(raw) > subagent.MaxAttributeBytes {
			return subagent.Rejectf(RuleInvalidAttribute, "subagent %s is %d bytes encoded, over the server's limit of %d bytes for a search attribute",
				a.field, len(raw), subagent.MaxAttributeBytes)
		}
	}
	if in.Request.Parent.SessionID == "" && in.Root == nil {
		return subagent.Rejectf(RuleMissingParent, "subagent request has no parent session and no root session to create")
	}
	return nil
}

// UnmarshalJSON decodes a StartInput, noting a timeout given as zero ("0s" or 0), which
// CheckInput refuses where a missing one means none.
func (in *StartInput) UnmarshalJSON(data []byte) error {
	type plain StartInput // without the method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	p.timeoutGiven = jsonFieldGiven(data, "timeout")
	*in = StartInput(p)
	return nil
}

// MarshalJSON encodes a StartInput as its fields say, keeping a timeout given as zero, so
// that the input a worker decoded encodes to one it refuses again.
func (in StartInput) MarshalJSON() ([]byte, error) {
	type plain StartInput // without the method
	raw, err := json.Marshal(plain(in))
	if err != nil || !in.timeoutGiven || in.Timeout != 0 || len(raw) < 2 {
		return raw, err
	}
	return append(raw[:len(raw)-1], `,"timeout":0}`...), nil
}

// jsonFieldGiven reports whether the JSON object data has the field name (matched as
// encoding/json matches fields, ignoring case) with a value other than null.
func jsonFieldGiven(data []byte, name string) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return false
	}
	for k, v := range fields {
		if strings.EqualFold(k, name) && strings.TrimSpace(string(v)) != "null" {
			return true
		}
	}
	return false
}

// CheckBatchInput makes the checks of a new batch's input that need no I/O, before it
// starts anything: a concurrency, when given, of at least 1; inline task ids (their
// workflow ids) each used once; a batch id within the server's limit for a search
// attribute. A batch that continues as new (State set) was checked when it started. Every
// failure is a *subagent.ValidationError whose message names the field.
func CheckBatchInput(in BatchInput) error {
	if in.State != nil {
		return nil
	}
	if in.Concurrency < 0 || in.Concurrency == 0 && in.concurrencyGiven {
		return subagent.Rejectf(RuleInvalidConcurrency, "batch concurrency must be at least 1 (leave it out for %d): %d",
			DefaultBatchConcurrency, in.Concurrency)
	}
	if raw, _ := json.Marshal(in.BatchID); len(raw) > subagent.MaxAttributeBytes {
		return subagent.Rejectf(RuleInvalidAttribute, "subagent batch is %d bytes encoded, over the server's limit of %d bytes for a search attribute",
			len(raw), subagent.MaxAttributeBytes)
	}
	return duplicateTaskID(in.Tasks, 0)
}

// duplicateTaskID rejects two tasks of tasks, numbered from first, with the same id.
func duplicateTaskID(tasks []Task, first int) error {
	seen := map[string]int{}
	for i, t := range tasks {
		if t.ID == "" {
			continue
		}
		if j, dup := seen[t.ID]; dup {
			return subagent.Rejectf(RuleDuplicateTaskID, "batch tasks %d and %d have the same id %q: each task's id names its own run",
				first+j, first+i, t.ID)
		}
		seen[t.ID] = i
	}
	return nil
}
