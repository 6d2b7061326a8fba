// TypeScript workflows that delegate to subflow: each delegation is a StartSubagent child
// workflow, started by type name on the subflow workers' task queue with a plain JSON input
// (docs/json.md).
import {
  CancellationScope,
  CancelledFailure,
  ChildWorkflowFailure,
  condition,
  defineSignal,
  executeChild,
  proxyActivities,
  setHandler,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from './activities';
import { Delegation, Outcome, START_SUBAGENT, startInput, SUBFLOW_TASK_QUEUE, text } from './subflow';

const { runOutcome } = proxyActivities<ReturnType<typeof createActivities>>({ startToCloseTimeout: '1 minute' });

/** What these workflows return of a run: the fields a caller usually wants. */
export interface Answer {
  childId: string;
  stopReason: string;
  text: string;
  structured?: unknown;
}

function answer(out: Outcome): Answer {
  return { childId: out.childId, stopReason: out.result.stopReason, text: text(out), structured: out.result.structured };
}

/** delegate runs one delegation as a child workflow and returns its answer. */
export async function delegate(d: Delegation): Promise<Answer> {
  const out = await executeChild<(input: unknown) => Promise<Outcome>>(START_SUBAGENT, {
    taskQueue: SUBFLOW_TASK_QUEUE,
    workflowId: `${workflowInfo().workflowId}-run`,
    args: [startInput(d)],
  });
  return answer(out);
}

/** fanOut runs every delegation at once, each a child workflow, and returns their answers in order. */
export async function fanOut(ds: Delegation[]): Promise<Answer[]> {
  const outs = await Promise.all(
    ds.map((d, i) =>
      executeChild<(input: unknown) => Promise<Outcome>>(START_SUBAGENT, {
        taskQueue: SUBFLOW_TASK_QUEUE,
        workflowId: `${workflowInfo().workflowId}-run-${i}`,
        args: [startInput(d)],
      }),
    ),
  );
  return outs.map(answer);
}

/** stop is the signal that makes delegateUntilStopped cancel its run. */
export const stop = defineSignal('stop');

/**
 * delegateUntilStopped starts one delegation and cancels it when the signal stop arrives: the
 * child ends aborted and keeps its partial answer. Its outcome is the details of the child's
 * Canceled failure, which this SDK does not hand to the parent (the failure it reports has
 * none), so the activity runOutcome reads it from the run.
 */
export async function delegateUntilStopped(d: Delegation): Promise<Answer> {
  let stopped = false;
  setHandler(stop, () => {
    stopped = true;
  });
  const scope = new CancellationScope();
  const child = await scope.run(() =>
    startChild<(input: unknown) => Promise<Outcome>>(START_SUBAGENT, {
      taskQueue: SUBFLOW_TASK_QUEUE,
      workflowId: `${workflowInfo().workflowId}-run`,
      args: [startInput(d)],
    }),
  );
  await Promise.race([condition(() => stopped), child.result()]).catch(() => undefined);
  scope.cancel();
  try {
    return answer(await child.result());
  } catch (err) {
    const cause = err instanceof ChildWorkflowFailure ? err.cause : err;
    if (!(cause instanceof CancelledFailure)) {
      throw err;
    }
    const details = cause.details as Outcome[];
    return answer(details.length > 0 ? details[0] : await runOutcome(child.workflowId));
  }
}
