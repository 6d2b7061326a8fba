package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/subflow-dev/subflow"
)

const deploymentUsage = `usage:
  starter deployment describe NAME
  starter deployment set-current NAME BUILD_ID [--force]
  starter deployment ramp NAME BUILD_ID PERCENT      (PERCENT 0 stops the ramp)
  starter deployment wait-drained NAME BUILD_ID [--timeout 1h]
`

// runDeployment is the thin rollout helper over Temporal's Worker Deployment API, the same
// operations as `temporal worker deployment …` (docs/deployment.md, "Rolling out a new
// build"): describe a deployment, make a version current, ramp one, wait for one to drain.
func runDeployment(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, deploymentUsage)
		return exitUsage
	}
	fs := newFlagSet("starter deployment "+args[0], stderr)
	timeout := fs.Duration("timeout", time.Hour, "wait-drained: give up after this long (exit 1)")
	force := fs.Bool("force", false, "set-current: make the version current even though no worker of it polls its task queues")
	positional, code, ok := parseArgs(fs, args[1:])
	if !ok {
		return code
	}
	want := map[string]int{"describe": 1, "set-current": 2, "ramp": 3, "wait-drained": 2}
	n, known := want[args[0]]
	if !known || len(positional) != n {
		fmt.Fprintf(stderr, "starter deployment: bad command line %q\n%s", args, deploymentUsage)
		return exitUsage
	}
	var percent float64
	if args[0] == "ramp" {
		p, err := strconv.ParseFloat(positional[2], 32)
		if err != nil || p < 0 || p > 100 {
			fmt.Fprintf(stderr, "starter deployment ramp: PERCENT must be a number from 0 to 100: %q\n", positional[2])
			return exitUsage
		}
		percent = p
	}
	c, ok := dialOrReport(ctx, stderr)
	if !ok {
		return exitError
	}
	defer c.Close()
	h := c.WorkerDeploymentClient().GetHandle(positional[0])
	var err error
	switch args[0] {
	case "describe":
		err = describeDeployment(ctx, h, stdout)
	case "set-current":
		if !*force {
			unpolled, cerr := unpolledVersion(ctx, c, positional[0], positional[1])
			if cerr != nil {
				fmt.Fprintf(stderr, "starter deployment set-current: %s:%s: %v\n", positional[0], positional[1], cerr)
				return exitError
			}
			if unpolled != "" {
				fmt.Fprintf(stderr, "starter deployment set-current: warning: %s\n"+
					"  new runs, and the batches and admissions that move to it, would wait for one; start its workers first, or give --force\n", unpolled)
				return exitError
			}
		}
		_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: positional[1]})
		if err == nil {
			fmt.Fprintf(stdout, "%s:%s is the current version: new runs start on it, batches and admissions move to it at their next continue-as-new\n", positional[0], positional[1])
		}
	case "ramp":
		_, err = h.SetRampingVersion(ctx, client.WorkerDeploymentSetRampingVersionOptions{BuildID: positional[1], Percentage: float32(percent)})
		if err == nil {
			fmt.Fprintf(stdout, "%s:%s ramps at %g%%\n", positional[0], positional[1], percent)
		}
	case "wait-drained":
		err = waitDrained(ctx, h, positional[1], *timeout, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "starter deployment %s: %s: %v\n", args[0], positional[0], err)
		return exitError
	}
	return exitCompleted
}

// describeDeployment prints the routing and every version with its drainage status.
func describeDeployment(ctx context.Context, h client.WorkerDeploymentHandle, stdout io.Writer) error {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return err
	}
	info := desc.Info
	rc := info.RoutingConfig
	fmt.Fprintf(stdout, "deployment  %s\n", info.Name)
	fmt.Fprintf(stdout, "current     %s\n", subflow.VersionName(rc.CurrentVersion))
	if rc.RampingVersion != nil || rc.RampingVersionPercentage > 0 {
		fmt.Fprintf(stdout, "ramping     %s at %g%%\n", subflow.VersionName(rc.RampingVersion), rc.RampingVersionPercentage)
	}
	fmt.Fprintf(stdout, "\n%-28s %-12s %s\n", "BUILD ID", "STATUS", "CREATED")
	for _, v := range info.VersionSummaries {
		fmt.Fprintf(stdout, "%-28s %-12s %s\n", v.Version.BuildID, versionStatus(v.Version, rc, v.DrainageStatus),
			v.CreateTime.UTC().Format(time.RFC3339))
	}
	return nil
}

// versionStatus is what a version does now: current, ramping, draining (pinned runs still
// open on it), drained (safe to stop its workers) or inactive (never current).
func versionStatus(v worker.WorkerDeploymentVersion, rc client.WorkerDeploymentRoutingConfig, ds client.WorkerDeploymentVersionDrainageStatus) string {
	switch {
	case rc.CurrentVersion != nil && *rc.CurrentVersion == v:
		return "current"
	case rc.RampingVersion != nil && *rc.RampingVersion == v:
		return "ramping"
	case ds == client.WorkerDeploymentVersionDrainageStatusDraining:
		return "draining"
	case ds == client.WorkerDeploymentVersionDrainageStatusDrained:
		return "drained"
	}
	return "inactive"
}

// waitDrained waits until no open run is pinned to the version, as the server reports it
// (it refreshes a draining version's status every few minutes).
func waitDrained(ctx context.Context, h client.WorkerDeploymentHandle, buildID string, timeout time.Duration, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		desc, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			return fmt.Errorf("version %s not found (deleted once drained and unpolled, or never polled)", buildID)
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("version %s not drained after %v (last status: %s)", buildID, timeout, last)
		case err != nil:
			return err
		}
		info := desc.Info
		status := "current or ramping: not draining"
		if d := info.DrainageInfo; d != nil {
			switch d.DrainageStatus {
			case client.WorkerDeploymentVersionDrainageStatusDrained:
				fmt.Fprintf(stdout, "%s drained: no open run is pinned to it; its workers can stop\n", buildID)
				return nil
			case client.WorkerDeploymentVersionDrainageStatusDraining:
				status = "draining (checked " + d.LastCheckedTime.UTC().Format(time.RFC3339) + ")"
			}
		}
		if status != last {
			fmt.Fprintf(stdout, "%s %s\n", buildID, status)
			last = status
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("version %s not drained after %v (last status: %s)", buildID, timeout, last)
		case <-time.After(5 * time.Second):
		}
	}
}

// unpolledVersion says why version deployment:buildID has no worker to run a workflow task,
// "" when a worker of it polled one of its workflow task queues lately
// (subflow.PollerRecent). A version the server does not know (none of its workers ever
// polled) is left to SetCurrentVersion's own error.
func unpolledVersion(ctx context.Context, c client.Client, deployment, buildID string) (string, error) {
	v := worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: buildID}
	desc, err := c.WorkerDeploymentClient().GetHandle(deployment).DescribeVersion(ctx,
		client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("describe the version: %w", err)
	}
	var queues []string
	for _, tq := range desc.Info.TaskQueuesInfos {
		if tq.Type != client.TaskQueueTypeWorkflow {
			continue
		}
		queues = append(queues, tq.Name)
		q, err := subflow.ReadQueueVersions(ctx, c, tq.Name)
		if err != nil {
			return "", err
		}
		if q.Polled(&v) {
			return "", nil
		}
	}
	if len(queues) == 0 {
		return fmt.Sprintf("no worker of %s has polled a workflow task queue yet", subflow.VersionName(&v)), nil
	}
	slices.Sort(queues)
	return fmt.Sprintf("no worker of %s has polled its task queues (%s) in the last %v",
		subflow.VersionName(&v), strings.Join(queues, ", "), subflow.PollerRecent), nil
}
