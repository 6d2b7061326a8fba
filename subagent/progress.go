package subagent

import (
	"fmt"
	"unicode/utf8"
)

// MaxTail bounds Progress.Tail, in bytes.
const MaxTail = 1024

// Progress is what a running child has done so far (contract R-73): the drivers (package
// inprocess and sdkproc) report it, the activities heartbeat it as the detail of Drive and
// RunSDKChild, and callers read it from the pending activity (subflow.Describe); the workflow
// never sees it.
//
// Summary repeats the figures as one human line (String), first in the JSON so the Temporal
// UI's pending-activity view reads "running: step 7, 3.2 kB streamed" before the numbers.
type Progress struct {
	Summary       string `json:"summary,omitempty"`
	Phase         string `json:"phase"`
	Steps         int    `json:"steps"`         // steps started so far
	StreamedBytes int64  `json:"streamedBytes"` // text-delta bytes of the child's own events
	OutputTokens  int64  `json:"outputTokens"`  // output tokens reported by assistant messages
	// Tail is the end of the partial output, at most MaxTail bytes (see Tail).
	Tail string `json:"tail,omitempty"`
	// LastTool is the latest tool call that returned, as DigestBuilder.LastTool shows it
	// ("read_file notes.txt: ok"), at the worker's digest level: empty when it is off.
	LastTool string `json:"lastTool,omitempty"`
}

// Tail returns the last MaxTail bytes of s, not splitting a UTF-8 sequence.
func Tail(s string) string {
	if len(s) <= MaxTail {
		return s
	}
	i := len(s) - MaxTail
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// String returns p as one line: "running: step 7, 3.2 kB streamed, 812 tokens, last tool
// grep TODO: ok", the phase left out when empty, the tokens when none were counted and the
// last tool when none returned.
func (p Progress) String() string {
	s := fmt.Sprintf("step %d, %s streamed", p.Steps, formatBytes(p.StreamedBytes))
	if p.OutputTokens > 0 {
		s += fmt.Sprintf(", %d tokens", p.OutputTokens)
	}
	if p.LastTool != "" {
		s += ", last tool " + p.LastTool
	}
	if p.Phase != "" {
		s = p.Phase + ": " + s
	}
	return s
}

// formatBytes renders n in SI units with one decimal: 512 B, 3.2 kB, 1.4 MB.
func formatBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1000)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/(1000*1000))
	}
}
