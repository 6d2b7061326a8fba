// Package cluster holds the end-to-end and fault tests of subflow on the deployed shape:
// Temporal's services as separate processes on PostgreSQL, two workers sharing their
// sessions there, as deploy/local-cluster/up starts them. They run when SUBFLOW_TEST_CLUSTER
// names the cluster's state directory and the client environment its frontend:
//
//	eval "$(deploy/local-cluster/up)"
//	SUBFLOW_TEST_CLUSTER=/tmp/subflow-local-cluster go test -count=1 -p 1 ./test/cluster
//
// The fault tests kill, stop and restart the cluster's processes with cluster.sh.
package cluster
