package cli

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/subflow-dev/subflow/harness/model"
)

// Pacing of the cancelled showcase's answer (pacedModel).
const (
	demoPaceEvery = 250 * time.Millisecond // between two words of the answer
	demoPaceHold  = 20 * time.Second       // the least a paced turn lasts
)

// pacedModel slows down the answers of requests from sessions under dir, and only those: it
// hands their text on a word at a time, every, and holds the end of their turn until hold has
// passed since the request began. The demo's cancelled showcase runs under dir, so that its
// cancel lands while the child is part-way through its answer whatever the model's speed (a
// fast endpoint answers a whole essay in a fraction of a second). A cancel ends the wait at
// once; the words already handed on are the child's partial answer.
type pacedModel struct {
	next        model.Model
	dir         string
	every, hold time.Duration
}

// paceUnder wraps every model of r in a pacedModel for the sessions under dir.
func paceUnder(r *model.Registry, dir string) *model.Registry {
	paced := &model.Registry{}
	for _, name := range r.Providers() {
		m, _ := r.Lookup(name)
		paced.Register(name, pacedModel{next: m, dir: dir, every: demoPaceEvery, hold: demoPaceHold})
	}
	return paced
}

func (p pacedModel) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	if rel, err := filepath.Rel(p.dir, req.Cwd); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p.next.Stream(ctx, req, onText)
	}
	begin := time.Now()
	resp, err := p.next.Stream(ctx, req, func(delta string) {
		for _, word := range strings.SplitAfter(delta, " ") {
			if word == "" || ctx.Err() != nil {
				continue
			}
			onText(word)
			sleep(ctx, p.every)
		}
	})
	if err == nil {
		sleep(ctx, p.hold-time.Since(begin))
	}
	if ctx.Err() != nil {
		return resp, ctx.Err()
	}
	return resp, err
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
