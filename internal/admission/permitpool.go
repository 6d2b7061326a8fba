package admission

import (
	"sync"
	"time"
)

// Permit reuse (docs/benchmarks.md, "Admission that scales"). Taking a permit from the
// provider's ModelAdmission costs an Update and giving it back a signal, each a workflow task
// of the one limiter workflow every worker shares, and the server admits only 10 in-flight
// updates per workflow; at a few hundred model requests a second that one workflow is the
// bottleneck even when its limit never binds. So a worker keeps a permit its request gave
// back and hands it to its own next request to the same provider, for a while: a permit
// still counts against the limit while the worker holds it, so the limit holds as before,
// and the limiter sees one acquire and one release per permitReuse instead of per request.
const (
	// permitReuse is how long after its grant a permit may serve further requests of the
	// worker that holds it; then it goes back, and the acquires other workers have waiting
	// get their turn. It is far below workflows.DefaultPermitTTL, so a reused permit never
	// expires in use.
	permitReuse = 2 * time.Second
	// permitIdle is how long a permit no request of this worker wants is kept before it goes
	// back.
	permitIdle = 100 * time.Millisecond
)

// heldPermit is a permit granted to this worker.
type heldPermit struct {
	id      string
	granted time.Time
}

// permitPool holds the idle permits of one provider granted to this worker. Providers with a
// requests-per-minute cap get none: each request there must be a grant the limiter counts.
type permitPool struct {
	giveBack func(id string) // releases a permit to the limiter

	mu   sync.Mutex
	idle []*idlePermit // most recently returned last
}

type idlePermit struct {
	heldPermit
	timer *time.Timer
}

// take returns an idle permit still within its reuse window, if there is one.
func (p *permitPool) take(now time.Time) (heldPermit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		last := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !last.timer.Stop() {
			continue // its idle timer fired: being given back
		}
		if now.Sub(last.granted) < permitReuse {
			return last.heldPermit, true
		}
		go p.giveBack(last.id)
	}
	return heldPermit{}, false
}

// put takes back a permit whose request ended: kept idle for the next request, or given
// back when its reuse window is over.
func (p *permitPool) put(h heldPermit, now time.Time) {
	reuseLeft := permitReuse - now.Sub(h.granted)
	if reuseLeft <= 0 {
		p.giveBack(h.id)
		return
	}
	ip := &idlePermit{heldPermit: h}
	p.mu.Lock()
	defer p.mu.Unlock()
	ip.timer = time.AfterFunc(min(permitIdle, reuseLeft), func() {
		p.mu.Lock()
		for i, x := range p.idle {
			if x == ip {
				p.idle = append(p.idle[:i], p.idle[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		p.giveBack(ip.id)
	})
	p.idle = append(p.idle, ip)
}

// giveBackAll gives back every idle permit at once: the worker is stopping, and a permit
// kept past its exit would count against the limit until it expired.
func (p *permitPool) giveBackAll() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ip := range idle {
		if ip.timer.Stop() {
			p.giveBack(ip.id)
		}
	}
}
