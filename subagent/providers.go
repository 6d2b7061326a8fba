package subagent

// Provider names known to every worker.
const (
	ProviderSpawn = "spawn"
	ProviderFork  = "fork"
	ProviderSDK   = "sdk"
)

// providerInfo is one row of the provider table.
type providerInfo struct {
	caps Capabilities
	// remote children run out of process, through the RunSDKChild activity; the others run
	// through Publish, Drive and ReadResult.
	remote bool
}

// providers is the one static provider table (contract R-3). The workflow validates requests
// against it without I/O, so every worker of a task queue must be built with the same table,
// or replays diverge: it is a constant of the build, not something a worker configures.
var providers = map[string]providerInfo{
	ProviderSpawn: {caps: Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}},
	ProviderFork: {caps: Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true,
		InheritsParentContext: true}},
	ProviderSDK: {remote: true},
}

// ProviderCapabilities returns the capabilities of the named provider, false when no
// provider has that name.
func ProviderCapabilities(provider string) (Capabilities, bool) {
	p, ok := providers[provider]
	return p.caps, ok
}

// IsRemote reports whether the named provider runs its children out of process (sdk).
func IsRemote(provider string) bool { return providers[provider].remote }

// CheckStart runs the start checks of contract R-4, which need no I/O, in order: the provider
// must be in the table, then CheckRequest against its capabilities, then the request's fields
// (CheckFields). Every failure is a *ValidationError.
func CheckStart(provider string, req Request) error {
	caps, ok := ProviderCapabilities(provider)
	if !ok {
		return Rejectf(RuleUnknownProvider, "no subagent provider registered for %q", provider)
	}
	if err := CheckRequest(provider, caps, req); err != nil {
		return err
	}
	return CheckFields(req)
}
