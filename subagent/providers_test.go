package subagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProviderTable(t *testing.T) {
	spawn, ok := ProviderCapabilities(ProviderSpawn)
	assert.True(t, ok)
	assert.Equal(t, Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}, spawn)
	fork, ok := ProviderCapabilities(ProviderFork)
	assert.True(t, ok)
	assert.True(t, fork.InheritsParentContext, "fork starts from the parent's turns")
	sdk, ok := ProviderCapabilities(ProviderSDK)
	assert.True(t, ok)
	assert.Equal(t, Capabilities{}, sdk, "the sdk child is configured on its own, not per request")
	_, ok = ProviderCapabilities("nope")
	assert.False(t, ok)

	assert.True(t, IsRemote(ProviderSDK))
	assert.False(t, IsRemote(ProviderSpawn))
	assert.False(t, IsRemote("nope"))
}
