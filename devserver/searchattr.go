package devserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/subflow-dev/subflow/workflows"
)

// SearchAttributes are the custom search attributes of contract R-75, by name: those of
// workflows.SearchAttributes, the one list. Start registers them in its namespace;
// SearchAttributeCommand renders them for other servers. SQL visibility allows at most 10
// Keyword, 3 Int and 3 Text attributes per namespace.
var SearchAttributes = func() map[string]enums.IndexedValueType {
	m := make(map[string]enums.IndexedValueType, len(workflows.SearchAttributes))
	for _, key := range workflows.SearchAttributes {
		m[key.GetName()] = key.GetValueType()
	}
	return m
}()

// SearchAttributeCommand returns the `temporal operator search-attribute create` command line
// that registers SearchAttributes in namespace on an existing cluster, attributes in name
// order. An empty namespace leaves the flag out, so the CLI's own default applies.
func SearchAttributeCommand(namespace string) string {
	var b strings.Builder
	b.WriteString("temporal operator search-attribute create")
	if namespace != "" {
		b.WriteString(" --namespace " + namespace)
	}
	for _, name := range slices.Sorted(maps.Keys(SearchAttributes)) {
		fmt.Fprintf(&b, " --name %s --type %s", name, SearchAttributes[name])
	}
	return b.String()
}

// ensureSearchAttributes adds the SearchAttributes missing from namespace. A namespace created
// by Start already has them; this covers a database made by an older build or another tool.
// Adding only the missing ones keeps a restart free of "already exists" warnings.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("devserver: list search attributes in %s: %w", namespace, err)
	}
	missing := map[string]enums.IndexedValueType{}
	for name, want := range SearchAttributes {
		got, ok := resp.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = want
		case got != want:
			return fmt.Errorf("devserver: search attribute %s in %s has type %s, want %s",
				name, namespace, got, want)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("devserver: add search attributes to %s: %w", namespace, err)
	}
	return nil
}
