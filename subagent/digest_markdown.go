package subagent

import (
	"fmt"
	"strings"
)

// RunLink is the Temporal Web UI's link to the workflow id, with the placeholder the UI
// replaces by the namespace it shows.
func RunLink(workflowID string) string {
	return "/namespaces/{namespace}/workflows/" + workflowID
}

// Markdown renders d as the Temporal Web UI shows a run's Current Details: a line of totals,
// a table with a row per tool call (a step without tools has one row of its own), a row
// counting the omitted middle steps, links to the nested runs, and the answer's head.
func (d *Digest) Markdown() string {
	var b strings.Builder
	stop := string(d.StopReason)
	if stop == "" {
		stop = "running"
	}
	fmt.Fprintf(&b, "**%s** · %s · %s", stop, plural(d.TotalSteps, "step"), plural(d.ToolCalls, "tool call"))
	if d.ToolErrors > 0 {
		fmt.Fprintf(&b, " (%d failed)", d.ToolErrors)
	}
	fmt.Fprintf(&b, " · %d input / %d output tokens\n\n", d.InputTokens, d.OutputTokens)
	if d.EndMessage != "" {
		fmt.Fprintf(&b, "Turn ended: %s\n\n", cell(d.EndMessage))
	}
	if len(d.Steps) > 0 {
		b.WriteString("| step | tokens in / out | model | tool | input | result | tool time |\n")
		b.WriteString("|---:|---:|---:|---|---|---|---:|\n")
	}
	for i, s := range d.Steps {
		if d.OmittedSteps > 0 && i > 0 && d.Steps[i-1].Step < s.Step-1 {
			fmt.Fprintf(&b, "| … | | | %d steps omitted | | | |\n", d.OmittedSteps)
		}
		step := fmt.Sprintf("| %d | %d / %d | %s |", s.Step, s.InputTokens, s.OutputTokens, ms(s.DurationMs))
		if len(s.Tools) == 0 {
			b.WriteString(step + " | | | |\n")
		}
		for j, t := range s.Tools {
			if j > 0 {
				step = "| | | |"
			}
			name := cell(t.Name)
			if t.WorkflowID != "" {
				name = fmt.Sprintf("[%s](%s)", name, RunLink(t.WorkflowID))
			}
			input := ""
			if t.Input != "" {
				input = "`" + strings.ReplaceAll(cell(t.Input), "`", "'") + "`"
			}
			result := t.Result
			if t.Error != "" {
				result += ": " + cell(t.Error)
			}
			fmt.Fprintf(&b, "%s %s | %s | %s | %s |\n", step, name, input, result, ms(t.DurationMs))
		}
		if s.OmittedTools > 0 {
			fmt.Fprintf(&b, "| | | | %d more tool calls | | | |\n", s.OmittedTools)
		}
	}
	if d.Answer != "" {
		fmt.Fprintf(&b, "\n**Answer:** %s\n", cell(d.Answer))
	}
	return b.String()
}

// plural returns "1 step", "2 steps".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// cell makes s one line that cannot end a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// ms renders milliseconds as 850ms or 1.2s.
func ms(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%dms", n)
	}
	return fmt.Sprintf("%.1fs", float64(n)/1000)
}
