package workflows

import "fmt"

// String returns p as one line: "running: step 7, 3.2 kB streamed, 812 tokens", the phase
// left out when empty and the tokens when none were counted.
func (p Progress) String() string {
	s := fmt.Sprintf("step %d, %s streamed", p.Steps, formatBytes(p.StreamedBytes))
	if p.OutputTokens > 0 {
		s += fmt.Sprintf(", %d tokens", p.OutputTokens)
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
