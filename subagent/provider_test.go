package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoProvider is the smallest real Provider: its runs complete at once with the prompt as
// output. Real providers live in packages that import this one.
type echoProvider struct {
	name    string
	caps    Capabilities
	started []Request
}

func (p *echoProvider) Name() string               { return p.name }
func (p *echoProvider) Capabilities() Capabilities { return p.caps }
func (p *echoProvider) Start(ctx context.Context, req Request) (Run, error) {
	p.started = append(p.started, req)
	return echoRun{id: fmt.Sprintf("run-%d", len(p.started)), out: req}, nil
}

type echoRun struct {
	id  string
	out Request
}

func (r echoRun) ID() string { return r.id }
func (r echoRun) Result(ctx context.Context) (Result, error) {
	return Result{Output: r.out.Prompt, StopReason: StopCompleted}, nil
}
func (r echoRun) Dispose(ctx context.Context) error { return nil }

var (
	allCaps = Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
	noCaps  = Capabilities{}
)

func ptr[T any](v T) *T { return &v }

func TestRegistryCheck(t *testing.T) {
	var reg Registry
	reg.Register(&echoProvider{name: "spawn", caps: allCaps})
	reg.Register(&echoProvider{name: "sdk", caps: noCaps})
	reg.Register(&echoProvider{name: "schema-only", caps: Capabilities{OutputSchema: true}})

	okSchema := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name     string
		provider string
		req      Request
		rule     string
		msg      string
	}{
		{"plain request passes", "spawn", Request{}, "", ""},
		{"everything supported passes", "spawn", Request{OutputSchema: okSchema, MaxDepth: ptr(int64(0)),
			ToolFilter: &ToolFilter{}, Persona: "p"}, "", ""},
		{"plain request to sdk passes", "sdk", Request{OutputSchema: json.RawMessage("null")}, "", ""},
		{"unknown provider", "nope", Request{}, RuleUnknownProvider,
			`no subagent provider registered for "nope"`},
		{"unknown provider comes before capabilities", "nope", Request{Persona: "p"}, RuleUnknownProvider,
			`no subagent provider registered for "nope"`},
		{"outputSchema", "sdk", Request{OutputSchema: okSchema}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "outputSchema" capability`},
		{"outputSchema first of all", "sdk", Request{OutputSchema: okSchema, MaxDepth: ptr(int64(1)),
			ToolFilter: &ToolFilter{}, Persona: "p"}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "outputSchema" capability`},
		{"depthLimit asked by maxDepth", "sdk", Request{MaxDepth: ptr(int64(1)), ToolFilter: &ToolFilter{}, Persona: "p"},
			RuleUnsupportedCapability, `subagent provider "sdk" does not support the "depthLimit" capability`},
		{"toolFilter", "sdk", Request{ToolFilter: &ToolFilter{}, Persona: "p"}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "toolFilter" capability`},
		{"persona", "sdk", Request{Persona: "p"}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "persona" capability`},
		{"schema supported, depth not", "schema-only", Request{OutputSchema: okSchema, MaxDepth: ptr(int64(1))},
			RuleUnsupportedCapability, `subagent provider "schema-only" does not support the "depthLimit" capability`},
		{"capability before maxDepth value", "sdk", Request{MaxDepth: ptr(int64(-1))}, RuleUnsupportedCapability,
			`subagent provider "sdk" does not support the "depthLimit" capability`},
		{"negative maxDepth", "spawn", Request{MaxDepth: ptr(int64(-1))}, RuleInvalidMaxDepth,
			"subagent maxDepth must be a non-negative safe integer"},
		{"maxDepth past 2^53-1", "spawn", Request{MaxDepth: ptr(int64(1 << 53))}, RuleInvalidMaxDepth,
			"subagent maxDepth must be a non-negative safe integer"},
		{"maxDepth 2^53-1 passes", "spawn", Request{MaxDepth: ptr(int64(1<<53 - 1))}, "", ""},
		{"maxDepth before schema", "spawn", Request{MaxDepth: ptr(int64(-1)), OutputSchema: json.RawMessage(`{}`)},
			RuleInvalidMaxDepth, "subagent maxDepth must be a non-negative safe integer"},
		{"schema not object-rooted", "spawn", Request{OutputSchema: json.RawMessage(`{"type":"string"}`)},
			RuleUnsupportedSchema, `unsupported JSON schema: schema.type must be "object" (structured output is object-rooted)`},
		{"schema outside the subset", "spawn", Request{OutputSchema: json.RawMessage(`{"type":"object","$ref":"#"}`)},
			RuleUnsupportedSchema, `unsupported JSON schema: schema.$ref is not a supported keyword`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reg.Check(tt.provider, tt.req)
			if tt.msg == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tt.msg, err.Error())
			assert.Equal(t, tt.rule, ve.Rule)
		})
	}
}

func TestRegistryStartChecksBeforeStarting(t *testing.T) {
	var reg Registry
	sdk := &echoProvider{name: "sdk", caps: noCaps}
	reg.Register(sdk)

	_, err := reg.Start(context.Background(), "sdk", Request{Persona: "p"})
	require.EqualError(t, err, `subagent provider "sdk" does not support the "persona" capability`)
	assert.Empty(t, sdk.started, "a rejected request must not reach the provider")

	_, err = reg.Start(context.Background(), "spawn", Request{})
	require.EqualError(t, err, `no subagent provider registered for "spawn"`)

	run, err := reg.Start(context.Background(), "sdk", Request{Label: "ok"})
	require.NoError(t, err)
	assert.Equal(t, "run-1", run.ID())
	require.Len(t, sdk.started, 1)
	assert.Equal(t, "ok", sdk.started[0].Label)
}

func TestRegistryLookupAndNames(t *testing.T) {
	var reg Registry
	assert.Empty(t, reg.Names())
	_, err := reg.Lookup("spawn")
	var ve *ValidationError
	require.True(t, errors.As(err, &ve))
	assert.Equal(t, RuleUnknownProvider, ve.Rule)

	first := &echoProvider{name: "spawn"}
	second := &echoProvider{name: "spawn", caps: allCaps}
	reg.Register(&echoProvider{name: "sdk"})
	reg.Register(first)
	reg.Register(second)
	assert.Equal(t, []string{"sdk", "spawn"}, reg.Names())
	p, err := reg.Lookup("spawn")
	require.NoError(t, err)
	assert.Same(t, second, p, "registering a name again replaces the provider")
}

func TestRegistryConcurrentUse(t *testing.T) {
	var reg Registry
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reg.Register(&echoProvider{name: fmt.Sprintf("p%d", i), caps: allCaps})
			_ = reg.Check("p0", Request{Persona: "x"})
			_ = reg.Names()
		}()
	}
	wg.Wait()
	assert.Len(t, reg.Names(), 8)
}
