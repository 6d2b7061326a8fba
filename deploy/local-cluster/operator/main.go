// Command operator is the part of the temporal CLI that deploy/temporal/setup-temporal.sh
// runs, so that the local cluster registers its namespace and search attributes with the
// very script compose runs: `operator cluster health`, `operator namespace describe|create`
// and `operator search-attribute list|create`, with the CLI's flags and exit codes.
// deploy/local-cluster/cluster.sh installs it as `temporal` on the script's PATH.
//
// The official CLI does not build with this project's pins (docs/deployment.md says why),
// hence this stand-in; it speaks Temporal's own gRPC API to TEMPORAL_ADDRESS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 || args[0] != "operator" {
		return fmt.Errorf("usage: temporal operator cluster health | namespace describe|create | search-attribute list|create [flags]")
	}
	group, verb := args[1], args[2]
	fs := flag.NewFlagSet(group+" "+verb, flag.ContinueOnError)
	namespace := fs.String("namespace", os.Getenv("TEMPORAL_NAMESPACE"), "namespace")
	retention := fs.Duration("retention", 72*time.Hour, "retention of a created namespace")
	name := fs.String("name", "", "search attribute name")
	typ := fs.String("type", "", "search attribute type: Keyword, Int, Text, …")
	if err := fs.Parse(args[3:]); err != nil {
		return err
	}
	if *namespace == "" {
		*namespace = "default"
	}
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if addr == "" {
		addr = "127.0.0.1:7233"
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ops, wf := operatorservice.NewOperatorServiceClient(conn), workflowservice.NewWorkflowServiceClient(conn)

	switch group + " " + verb {
	case "cluster health":
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "temporal.api.workflowservice.v1.WorkflowService"})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("frontend at %s is %s", addr, resp.GetStatus())
		}
		fmt.Println("SERVING")
	case "namespace describe":
		resp, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: *namespace})
		if err != nil {
			return err
		}
		fmt.Println(resp.GetNamespaceInfo().GetName(), resp.GetNamespaceInfo().GetState())
	case "namespace create":
		_, err := wf.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: *namespace, WorkflowExecutionRetentionPeriod: durationpb.New(*retention),
		})
		return err
	case "search-attribute list":
		resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: *namespace})
		if err != nil {
			return err
		}
		for _, attrs := range []map[string]enumspb.IndexedValueType{resp.GetSystemAttributes(), resp.GetCustomAttributes()} {
			names := make([]string, 0, len(attrs))
			for n := range attrs {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				fmt.Printf("%s %s\n", n, strings.TrimPrefix(attrs[n].String(), "INDEXED_VALUE_TYPE_"))
			}
		}
	case "search-attribute create":
		v, ok := enumspb.IndexedValueType_value["INDEXED_VALUE_TYPE_"+strings.ToUpper(*typ)]
		if *name == "" || !ok {
			return fmt.Errorf("search-attribute create: want --name NAME --type Keyword|Int|Text|…, got %q %q", *name, *typ)
		}
		_, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: *namespace, SearchAttributes: map[string]enumspb.IndexedValueType{*name: enumspb.IndexedValueType(v)},
		})
		return err
	default:
		return fmt.Errorf("operator %s %s: not one of the commands setup-temporal.sh runs", group, verb)
	}
	return nil
}
