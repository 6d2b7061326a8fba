package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/subflow-dev/subflow/harness/tools"
)

// DefaultPresetName is the name of DefaultPreset.
const DefaultPresetName = "default"

// Preset is a named agent configuration: the tools its agents see and their system prompt
// sections. Empty Tools means every tool of the registry.
type Preset struct {
	Name     string    `json:"name"`
	Tools    []string  `json:"tools,omitempty"`
	Sections []Section `json:"sections,omitempty"`
}

// DefaultPreset returns the built-in preset: the built-in file tools, a persona section and a
// short working-rules section.
func DefaultPreset() Preset {
	return Preset{
		Name:  DefaultPresetName,
		Tools: append([]string(nil), tools.DefaultToolNames...),
		Sections: []Section{
			{
				Name:  PersonaSection,
				Order: 0,
				Text:  "You are a careful software engineering agent working in the user's workspace.",
			},
			{
				Name:  "working-rules",
				Order: 100,
				Text: "Use the tools to inspect files before making claims about them; paths are " +
					"relative to the working directory. Keep answers short and concrete, and say " +
					"plainly when something could not be done.",
			},
		},
	}
}

// LoadPresets reads presets from a JSON file holding an object that maps preset names to
// presets: {"name": {"tools": ["read_file"], "sections": [{"name", "order", "text"}]}}.
// A preset's Name is taken from its key. Unknown fields, sections without a name and
// duplicate section names are errors.
func LoadPresets(path string) (map[string]Preset, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent: load presets: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var file map[string]Preset
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("agent: load presets %s: %w", path, err)
	}
	if file == nil {
		return nil, fmt.Errorf("agent: load presets %s: want a JSON object of presets", path)
	}
	for name, p := range file {
		if name == "" {
			return nil, fmt.Errorf("agent: load presets %s: a preset has an empty name", path)
		}
		if p.Name != "" && p.Name != name {
			return nil, fmt.Errorf("agent: load presets %s: preset %q is named %q inside", path, name, p.Name)
		}
		p.Name = name
		seen := make(map[string]bool, len(p.Sections))
		for i, s := range p.Sections {
			if s.Name == "" {
				return nil, fmt.Errorf("agent: load presets %s: preset %q: section %d has no name", path, name, i)
			}
			if seen[s.Name] {
				return nil, fmt.Errorf("agent: load presets %s: preset %q: duplicate section %q", path, name, s.Name)
			}
			seen[s.Name] = true
		}
		for i, t := range p.Tools {
			if t == "" {
				return nil, fmt.Errorf("agent: load presets %s: preset %q: tool %d has an empty name", path, name, i)
			}
		}
		file[name] = p
	}
	return file, nil
}
