package subagent

// Descriptor values (contract R-7).
const (
	DescriptorVersion = 2
	ModeOneShot       = "one-shot"
)

// Descriptor is the payload of the log-only `subagent/descriptor` event (contract R-7). It never
// enters model history.
type Descriptor struct {
	Version  int    `json:"version"`
	Mode     string `json:"mode"`
	Provider string `json:"provider"`
	Label    string `json:"label,omitempty"`
}

// NewDescriptor returns the descriptor of a one-shot run of provider. An empty label is
// left out.
func NewDescriptor(provider, label string) Descriptor {
	return Descriptor{Version: DescriptorVersion, Mode: ModeOneShot, Provider: provider, Label: label}
}
