package agent

import (
	"slices"
	"strings"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
)

// PersonaSection is the name of the persona section; it sits at order 0 and SetPersona
// replaces it.
const PersonaSection = "persona"

// Section is one named part of the system prompt. The system prompt is every section sorted by
// Order (ties keep the order they were added in), joined by blank lines.
type Section struct {
	Name  string `json:"name"`
	Order int    `json:"order"`
	Text  string `json:"text"`
}

// Statement is one runtime-context statement. Statements reach the model as one user-role
// message placed before the conversation, sorted by Order and joined by blank lines; they are
// never part of the system prompt.
type Statement struct {
	Order int
	Text  string
}

// SetPersona replaces the persona section (order 0) with text, or adds it.
func (a *Agent) SetPersona(text string) {
	a.promptMu.Lock()
	defer a.promptMu.Unlock()
	a.sections = slices.DeleteFunc(a.sections, func(s Section) bool { return s.Name == PersonaSection })
	a.sections = append(a.sections, Section{Name: PersonaSection, Order: 0, Text: text})
	a.system = ""
}

// AddSection appends a section to the system prompt. A section with the name of an existing
// one replaces it; otherwise sections accumulate.
func (a *Agent) AddSection(s Section) {
	a.promptMu.Lock()
	defer a.promptMu.Unlock()
	if i := slices.IndexFunc(a.sections, func(x Section) bool { return x.Name == s.Name }); i >= 0 && s.Name != "" {
		a.sections[i] = s
	} else {
		a.sections = append(a.sections, s)
	}
	a.system = ""
}

// AddContext adds a runtime-context statement.
func (a *Agent) AddContext(st Statement) {
	a.promptMu.Lock()
	defer a.promptMu.Unlock()
	a.statements = append(a.statements, st)
	a.contextMsg = nil
}

// SystemPrompt returns the system prompt the next model request gets.
func (a *Agent) SystemPrompt() string {
	system, _ := a.prompt()
	return system
}

// prompt returns the system prompt and the runtime-context message (nil when there are no
// statements), rendering them once per change rather than once per step.
func (a *Agent) prompt() (string, []model.Message) {
	a.promptMu.Lock()
	defer a.promptMu.Unlock()
	if a.system == "" && len(a.sections) > 0 {
		sorted := slices.Clone(a.sections)
		slices.SortStableFunc(sorted, func(x, y Section) int { return x.Order - y.Order })
		texts := make([]string, 0, len(sorted))
		for _, s := range sorted {
			if s.Text != "" {
				texts = append(texts, s.Text)
			}
		}
		a.system = strings.Join(texts, "\n\n")
	}
	if a.contextMsg == nil && len(a.statements) > 0 {
		sorted := slices.Clone(a.statements)
		slices.SortStableFunc(sorted, func(x, y Statement) int { return x.Order - y.Order })
		texts := make([]string, len(sorted))
		for i, s := range sorted {
			texts[i] = s.Text
		}
		a.contextMsg = []model.Message{{
			Role:    model.RoleUser,
			Content: []session.Block{session.Text(strings.Join(texts, "\n\n"))},
		}}
	}
	return a.system, a.contextMsg
}
