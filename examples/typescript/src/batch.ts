// A TypeScript client of subflow's batch workflow: start one, and read its results from
// Temporal, where each task's run keeps its own (docs/json.md, "Reading the results").
import { Client } from '@temporalio/client';
import { BATCH, BatchInput, BatchSummary, Outcome, SUBFLOW_TASK_QUEUE } from './subflow';

/** startBatch starts the batch in with the workflow id batchId, and returns its handle. */
export async function startBatch(client: Client, batchId: string, input: BatchInput) {
  return client.workflow.start<(input: BatchInput) => Promise<BatchSummary>>(BATCH, {
    taskQueue: SUBFLOW_TASK_QUEUE,
    workflowId: batchId,
    args: [{ ...input, batchId }],
  });
}

/** One task's result: its number, its run, and the run's outcome. */
export interface TaskResult {
  index: number;
  workflowId: string;
  outcome: Outcome;
}

/**
 * batchResults reads the result of every task that ran of the finished batch with summary
 * sum, ordered by task number. It lists the batch's runs by their SubagentBatch search
 * attribute, and lists again until the list holds every run the summary counts, since
 * visibility may lag behind the runs.
 */
export async function batchResults(client: Client, sum: BatchSummary, timeoutMs = 60_000): Promise<TaskResult[]> {
  const want = sum.done - (sum.startErrors?.length ?? 0);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const runs: { index: number; workflowId: string }[] = [];
    for await (const wf of client.workflow.list({ query: `SubagentBatch = "${sum.batchId}"` })) {
      runs.push({ index: Number(wf.memo?.subflowBatchIndex), workflowId: wf.workflowId });
    }
    if (runs.length >= want) {
      const results = await Promise.all(
        runs.map(async (r) => ({ ...r, outcome: await outcomeOf(client, r.workflowId) })),
      );
      return results.sort((a, b) => a.index - b.index);
    }
    if (Date.now() > deadline) {
      throw new Error(`batch ${sum.batchId}: ${runs.length} runs listed of ${want}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** outcomeOf returns the outcome of a finished run: its result, or a cancelled run's details. */
export async function outcomeOf(client: Client, workflowId: string): Promise<Outcome> {
  try {
    return await client.workflow.getHandle(workflowId).result();
  } catch (err) {
    const details = (err as { cause?: { details?: unknown[] } }).cause?.details;
    if (details && details.length > 0) {
      return details[0] as Outcome;
    }
    throw err;
  }
}
