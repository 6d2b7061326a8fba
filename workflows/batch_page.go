package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/subflow-dev/subflow/subagent"
)

// maxLastFailed bounds BatchSummary.LastFailed.
const maxLastFailed = 5

// noteFailed keeps res among the last failed tasks of s (those that ended with another stop
// reason than completed, or without an outcome), newest last, its error and end message
// cut to their first line: the summary travels in every update's answer.
func (s *BatchSummary) noteFailed(res BatchResult) {
	res.Error = subagent.FirstLine(res.Error, 160)
	res.EndMessage = subagent.FirstLine(res.EndMessage, 160)
	s.LastFailed = append(s.LastFailed, res)
	if n := len(s.LastFailed); n > maxLastFailed {
		s.LastFailed = slices.Clone(s.LastFailed[n-maxLastFailed:])
	}
}

// BatchPage renders a batch's summary as its Current Details in the Temporal Web UI, at time
// now: a table of its tasks by state, its rate and estimated end, its controls, and the last
// failed tasks with links to their runs. Every figure comes from the summary, so the page
// says what the progress query and `starter batch status --json` say.
func BatchPage(s BatchSummary, now time.Time) string {
	var b strings.Builder
	state := "running"
	switch {
	case s.Cancelled:
		state = "cancelled"
	case s.Done == s.Total:
		state = "done"
	case s.Paused:
		state = "paused"
	}
	fmt.Fprintf(&b, "**batch %s** · %s · %d of %d tasks done\n\n", s.BatchID, state, s.Done, s.Total)
	b.WriteString("| pending | running | completed | aborted | error | max-tokens | refusal | failed |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	by := s.ByStopReason
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d |\n\n", s.Queued, s.Running,
		by[subagent.StopCompleted], by[subagent.StopAborted], by[subagent.StopError],
		by[subagent.StopMaxTokens], by[subagent.StopRefusal], s.Failed)

	fmt.Fprintf(&b, "| concurrency | paused | runs/s | estimated end | tokens in / out |\n|---:|---|---:|---|---:|\n")
	rate, end := "–", "–"
	if elapsed := now.Sub(s.Started); !s.Started.IsZero() && elapsed > 0 && s.Done > 0 {
		perSecond := float64(s.Done) / elapsed.Seconds()
		rate = fmt.Sprintf("%.2f", perSecond)
		if left := s.Total - s.Done; left > 0 && !s.Cancelled {
			end = now.Add(time.Duration(float64(left) / perSecond * float64(time.Second))).UTC().Format(time.RFC3339)
		}
	}
	fmt.Fprintf(&b, "| %d | %t | %s | %s | %d / %d |\n", s.Concurrency, s.Paused, rate, end, s.InputTokens, s.OutputTokens)
	if s.BuildHeld != "" {
		fmt.Fprintf(&b, "\n**Build**: %s\n", s.BuildHeld)
	}
	// The page changes only on the batch's workflow tasks: say when this one ran.
	fmt.Fprintf(&b, "\nAs of %s.\n", now.UTC().Format(time.RFC3339))

	if len(s.LastFailed) > 0 {
		b.WriteString("\n**Last failed tasks**\n\n| task | label | stop reason | run |\n|---:|---|---|---|\n")
		for i := len(s.LastFailed) - 1; i >= 0; i-- {
			f := s.LastFailed[i]
			why := string(f.StopReason)
			switch {
			case f.Error != "":
				why = "failed: " + f.Error
			case f.EndMessage != "":
				why += ": " + f.EndMessage
			}
			run := ""
			if f.WorkflowID != "" {
				run = fmt.Sprintf("[%s](%s)", f.WorkflowID, subagent.RunLink(f.WorkflowID))
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", f.Index, cellText(f.Label), cellText(why), run)
		}
	}
	return b.String()
}

// cellText makes s one line that cannot end a Markdown table cell.
func cellText(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
