package activities

import (
	"context"

	"go.temporal.io/sdk/client"
)

// SetClient replaces the client nested runs start through: the test activity environment has
// none.
func SetClient(a *Activities, c client.Client) {
	a.client = func(context.Context) client.Client { return c }
}
