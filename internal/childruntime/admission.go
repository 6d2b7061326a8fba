package childruntime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/subflow-dev/subflow/harness/model"
	"github.com/subflow-dev/subflow/internal/wire"
)

// releaseTimeout bounds a model/release call: a permit whose release is lost expires on the
// client's side (docs/sdk-children.md).
const releaseTimeout = 30 * time.Second

// admitted returns the runtime's models with the providers the client admits (initialize's
// Admission) wrapped so that each of their requests first asks the client for a permit
// (model/admit) and gives it back after (model/release): the client's cluster-wide limits
// then cover the child's requests as they cover the worker's own.
func (s *server) admitted(providers []string) *model.Registry {
	if len(providers) == 0 {
		return s.models
	}
	out := &model.Registry{}
	adm := model.Admission{Admit: s.admit}
	for _, name := range s.models.Providers() {
		m, err := s.models.Lookup(name)
		if err != nil {
			continue
		}
		if slices.Contains(providers, name) {
			m = model.Admitted(m, adm)
		}
		out.Register(name, m)
	}
	return out
}

// admit asks the client for a permit for one request to provider and returns its release.
func (s *server) admit(ctx context.Context, provider string) (func(), error) {
	var res wire.ModelAdmitResult
	if err := s.callClient(ctx, wire.MethodModelAdmit, wire.ModelAdmitParams{Provider: provider}, &res); err != nil {
		return nil, fmt.Errorf("%s %s: %w", wire.MethodModelAdmit, provider, err)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		var ok struct{}
		_ = s.callClient(rctx, wire.MethodModelRelease, wire.ModelReleaseParams{Permit: res.Permit}, &ok)
	}, nil
}
