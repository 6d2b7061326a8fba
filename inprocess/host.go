package inprocess

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/subflow-dev/subflow/harness/agent"
	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/harness/session"
	"github.com/subflow-dev/subflow/harness/tools"
)

// ErrAbortedBeforePublication is matched by the error Create and Start return when the context
// is done before the child was published; nothing is left behind. The error reads exactly as
// this sentinel and also matches the context's own error, context.Canceled or
// context.DeadlineExceeded.
var ErrAbortedBeforePublication = errors.New("subagent request was aborted before child publication")

// ErrAlreadyLive is returned by Drive when this Host already runs the child.
var ErrAlreadyLive = errors.New("child is already running on this host")

// Options configure a Host. Store, Models and Tools are required.
type Options struct {
	Store  session.Store
	Models *model.Registry
	Tools  *tools.Registry
	// Presets maps preset names to presets. A child joins its parent's preset (header
	// agentPreset); a parent without one, or with the name "default" absent from this map,
	// gets agent.DefaultPreset.
	Presets map[string]agent.Preset
	// Logger receives diagnostics; nil logs nothing.
	Logger *zap.Logger
	// Protected are directories the children's file tools refuse whatever their cwd
	// (tools.Env.Protected). The root of a store with a `Root() string` method (the file
	// store) is always protected.
	Protected []string
	// Roots are the workspace roots every child's cwd must resolve under (tools.Env.Roots);
	// empty means any cwd.
	Roots []string
	// HardLinkRoots are the roots whose hard links are trusted (tools.Env.HardLinkRoots):
	// elsewhere the children's file tools do not read a file with more than one hard link.
	HardLinkRoots []string
}

// Host runs in-process children over one session store. It keeps a live registry of the
// children it is running: a child is published into it once set up, and removed at teardown.
// A Host is safe for concurrent use; several Hosts (workers) may share one store.
type Host struct {
	store   session.Store
	models  *model.Registry
	tools   *tools.Registry
	presets map[string]agent.Preset
	log     *zap.Logger
	// protected is Options.Protected with the store's root.
	protected []string
	roots     []string
	links     []string // Options.HardLinkRoots

	mu   sync.Mutex
	live map[string]*child
}

// NewHost returns a Host with no live children.
func NewHost(opts Options) (*Host, error) {
	if opts.Store == nil || opts.Models == nil || opts.Tools == nil {
		return nil, errors.New("inprocess: new host: Store, Models and Tools are required")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	protected := append([]string(nil), opts.Protected...)
	if r, ok := opts.Store.(interface{ Root() string }); ok {
		protected = append(protected, r.Root())
	}
	return &Host{
		store:     opts.Store,
		models:    opts.Models,
		tools:     opts.Tools,
		presets:   opts.Presets,
		log:       log,
		protected: protected,
		roots:     opts.Roots,
		links:     opts.HardLinkRoots,
		live:      make(map[string]*child),
	}, nil
}

// Live returns the ids of the children this Host is running, sorted.
func (h *Host) Live() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.live))
}

// Agent returns the live agent of a child this Host is running.
func (h *Host) Agent(childID string) (*agent.Agent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.live[childID]
	if !ok {
		return nil, false
	}
	return c.agent, true
}

// publish adds c to the live registry.
func (h *Host) publish(c *child) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.live[c.id]; dup {
		return fmt.Errorf("inprocess: publish %s: %w", c.id, ErrAlreadyLive)
	}
	h.live[c.id] = c
	return nil
}

// unpublish removes c from the live registry, if it is the one registered under its id.
func (h *Host) unpublish(c *child) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.live[c.id] == c {
		delete(h.live, c.id)
	}
}

// preset resolves a header's agentPreset.
func (h *Host) preset(name string) (agent.Preset, error) {
	if name == "" {
		name = agent.DefaultPresetName
	}
	if p, ok := h.presets[name]; ok {
		if p.Name == "" {
			p.Name = name
		}
		return p, nil
	}
	if name == agent.DefaultPresetName {
		return agent.DefaultPreset(), nil
	}
	return agent.Preset{}, fmt.Errorf("unknown agent preset %q", name)
}
