package admission

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// givenBack records the permits a pool gave back.
type givenBack struct {
	mu  sync.Mutex
	ids []string
}

func (g *givenBack) add(id string) {
	g.mu.Lock()
	g.ids = append(g.ids, id)
	g.mu.Unlock()
}

func (g *givenBack) get() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.ids...)
}

func TestPermitPoolReusesWithinItsWindow(t *testing.T) {
	var back givenBack
	p := &permitPool{giveBack: back.add}
	now := time.Now()
	p.put(heldPermit{id: "a", granted: now}, now)
	h, ok := p.take(now)
	require.True(t, ok, "a permit just returned serves the next request")
	assert.Equal(t, "a", h.id)
	_, ok = p.take(now)
	assert.False(t, ok, "one permit serves one request at a time")
	assert.Empty(t, back.get(), "a reused permit is not given back")
}

func TestPermitPoolGivesBackIdlePermits(t *testing.T) {
	var back givenBack
	p := &permitPool{giveBack: back.add}
	now := time.Now()
	p.put(heldPermit{id: "a", granted: now}, now)
	require.Eventually(t, func() bool { return len(back.get()) == 1 }, 10*time.Second, time.Millisecond,
		"an idle permit goes back after permitIdle")
	_, ok := p.take(time.Now())
	assert.False(t, ok)
	assert.Equal(t, []string{"a"}, back.get(), "given back once")
}

func TestPermitPoolGivesBackPermitsPastReuse(t *testing.T) {
	var back givenBack
	p := &permitPool{giveBack: back.add}
	now := time.Now()
	p.put(heldPermit{id: "old", granted: now.Add(-permitReuse)}, now)
	assert.Equal(t, []string{"old"}, back.get(), "a permit past its reuse window goes back at once")
	_, ok := p.take(now)
	assert.False(t, ok)
}

func TestPermitPoolGiveBackAll(t *testing.T) {
	var back givenBack
	p := &permitPool{giveBack: back.add}
	now := time.Now()
	p.put(heldPermit{id: "a", granted: now}, now)
	p.put(heldPermit{id: "b", granted: now}, now)
	p.giveBackAll()
	assert.ElementsMatch(t, []string{"a", "b"}, back.get())
	time.Sleep(2 * permitIdle)
	assert.Len(t, back.get(), 2, "their idle timers were stopped: no second give-back")
}
