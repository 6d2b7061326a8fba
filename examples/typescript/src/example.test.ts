// Runs the example against the Temporal server at TEMPORAL_ADDRESS (default localhost:7233),
// where a subflow worker serves the task queue subflow (`go run ./starter dev` serves both;
// run.sh starts one). The subflow runs use the scripted model: no model API is called.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import {
  ApplicationFailure,
  Client,
  Connection,
  defaultPayloadConverter,
  WithStartWorkflowOperation,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createActivities } from './activities';
import { batchResults, startBatch } from './batch';
import { check } from './contract';
import { Published, START_SUBAGENT, startInput, Status, SUBFLOW_TASK_QUEUE, text, Outcome, Route } from './subflow';
import type { delegate, delegateUntilStopped, fanOut } from './workflows';

const address = process.env.TEMPORAL_ADDRESS ?? 'localhost:7233';
const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
const taskQueue = `typescript-example-${randomUUID()}`;

// The runs' directory: the root sessions' cwd, and where the model scripts lie. The subflow
// worker runs on this host, so it sees the same files.
const dir = mkdtempSync(join(tmpdir(), 'subflow-ts-'));

/** scripted returns the route of a scripted model answering with the given responses (docs/cli.md). */
function scripted(...responses: object[]): Route {
  const path = join(dir, `${randomUUID()}.json`);
  writeFileSync(path, JSON.stringify({ responses }));
  return { provider: 'scripted', model: path };
}

let client: Client;
let worker: Worker;
let running: Promise<void>;

before(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  client = new Client({ connection: await Connection.connect({ address }), namespace });
  worker = await Worker.create({
    connection: await NativeConnection.connect({ address }),
    namespace,
    taskQueue,
    workflowsPath: require.resolve('./workflows'),
    activities: createActivities(client),
  });
  running = worker.run();
});

after(async () => {
  worker.shutdown();
  await running;
  await client.connection.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a TypeScript workflow delegating to subflow runs', () => {
  test('one run', async () => {
    const d = { task: 'say hello', cwd: dir, route: scripted({ text: 'hello from a subflow run' }) };
    check('start-input', startInput(d)); // what the workflow sends
    const got = await client.workflow.execute<typeof delegate>('delegate', {
      taskQueue,
      workflowId: `ts-one-${randomUUID()}`,
      args: [d],
    });
    assert.equal(got.stopReason, 'completed');
    assert.equal(got.text, 'hello from a subflow run');
  });

  test('a fan-out', async () => {
    const got = await client.workflow.execute<typeof fanOut>('fanOut', {
      taskQueue,
      workflowId: `ts-fan-out-${randomUUID()}`,
      args: [[1, 2, 3].map((n) => ({ task: `part ${n}`, cwd: dir, route: scripted({ text: `answer ${n}` }) }))],
    });
    assert.deepEqual(
      got.map((a) => [a.stopReason, a.text]),
      [
        ['completed', 'answer 1'],
        ['completed', 'answer 2'],
        ['completed', 'answer 3'],
      ],
    );
    assert.equal(new Set(got.map((a) => a.childId)).size, 3);
  });

  test('a structured result', async () => {
    const got = await client.workflow.execute<typeof delegate>('delegate', {
      taskQueue,
      workflowId: `ts-structured-${randomUUID()}`,
      args: [
        {
          task: 'rate it',
          cwd: dir,
          route: scripted({ toolCalls: [{ name: 'structured_output', input: { verdict: 'fine', score: 4 } }] }),
          outputSchema: {
            type: 'object',
            properties: { verdict: { type: 'string' }, score: { type: 'integer' } },
            required: ['verdict', 'score'],
          },
        },
      ],
    });
    assert.equal(got.stopReason, 'completed');
    assert.deepEqual(got.structured, { verdict: 'fine', score: 4 });
  });

  test('a cancel keeps the partial answer', async () => {
    const words = 'one two three four five six seven eight nine ten';
    const workflowId = `ts-cancel-${randomUUID()}`;
    const handle = await client.workflow.start<typeof delegateUntilStopped>('delegateUntilStopped', {
      taskQueue,
      workflowId,
      args: [{ task: 'count slowly', cwd: dir, route: scripted({ text: words, chunks: 10, delayMs: 30_000 }) }],
    });
    // Stop once the run has streamed part of its answer: the heartbeat of its pending drive
    // says how much (docs/json.md, the query status).
    await waitFor(async () => (await streamedBytes(`${workflowId}-run`)) > 0);
    const status = check('status', await client.workflow.getHandle(`${workflowId}-run`).query<Status>('status'));
    assert.equal(status.phase, 'driving');
    await handle.signal('stop');
    const got = await handle.result();
    assert.equal(got.stopReason, 'aborted');
    assert.ok(got.text.length > 0 && words.startsWith(got.text), `partial answer ${JSON.stringify(got.text)}`);
  });
});

describe('a TypeScript client of subflow', () => {
  test('Update-with-Start on published, the status query and the outcome', async () => {
    const workflowId = `ts-client-${randomUUID()}`;
    const start = new WithStartWorkflowOperation(START_SUBAGENT, {
      taskQueue: SUBFLOW_TASK_QUEUE,
      workflowId,
      workflowIdConflictPolicy: 'FAIL',
      args: [check('start-input', { ...startInput({ task: 'say hi', cwd: dir, route: scripted({ text: 'hi' }) }), timeout: '10m' })],
    });
    const pub = check<Published>('published', await client.workflow.executeUpdateWithStart('published', { startWorkflowOperation: start }));
    assert.equal(pub.depth, 1);
    const handle = await start.workflowHandle();
    const out = check<Outcome>('outcome', await handle.result());
    assert.equal(out.childId, pub.childId);
    assert.equal(text(out), 'hi');
    const status = check('status', await handle.query<Status>('status'));
    assert.equal(status.phase, 'completed');
    assert.equal(status.stopReason, 'completed');
  });

  test('a rejection carries its rule and exact message', async () => {
    const input = startInput({ task: 'go deep', cwd: dir, route: scripted({ text: 'never' }) });
    input.request.maxDepth = 0;
    const start = new WithStartWorkflowOperation(START_SUBAGENT, {
      taskQueue: SUBFLOW_TASK_QUEUE,
      workflowId: `ts-rejected-${randomUUID()}`,
      workflowIdConflictPolicy: 'FAIL',
      args: [input],
    });
    const err = await client.workflow
      .executeUpdateWithStart('published', { startWorkflowOperation: start })
      .then(() => assert.fail('the update succeeded'))
      .catch((e) => e);
    assert.ok(err instanceof WorkflowUpdateFailedError, String(err));
    assert.ok(err.cause instanceof ApplicationFailure, String(err.cause));
    assert.equal(err.cause.type, 'depth-exceeded');
    assert.equal(err.cause.message, 'subagent depth 1 exceeds maxDepth 0');
  });

  test('a batch and its results', async () => {
    const batchId = `ts-batch-${randomUUID()}`;
    const handle = await startBatch(client, batchId, check('batch-input', {
      tasks: [
        { task: 'first', cwd: '.', modelProvider: 'scripted', model: scripted({ text: 'first answer' }).model, label: 'a' },
        { task: 'second', modelProvider: 'scripted', model: scripted({ text: 'second answer' }).model, timeout: '5m' },
        {
          task: 'third',
          modelProvider: 'scripted',
          model: scripted({ toolCalls: [{ name: 'structured_output', input: { n: 3 } }] }).model,
          outputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
        },
      ],
      total: 3,
      defaults: { dir },
      concurrency: 2,
    }));
    const sum = check('batch-summary', await handle.result());
    assert.equal(sum.done, 3);
    assert.deepEqual(sum.byStopReason, { completed: 3 });
    const progress = await handle.query('progress');
    assert.deepEqual(progress, sum);

    const results = await batchResults(client, sum);
    results.forEach((r) => check('outcome', r.outcome));
    assert.deepEqual(
      results.map((r) => [r.index, text(r.outcome), r.outcome.result.structured]),
      [
        [0, 'first answer', undefined],
        [1, 'second answer', undefined],
        [2, '', { n: 3 }],
      ],
    );
  });
});

/** streamedBytes returns what the pending drive of the run workflowId has streamed so far, by its heartbeat. */
async function streamedBytes(workflowId: string): Promise<number> {
  let d;
  try {
    d = await client.workflow.getHandle(workflowId).describe();
  } catch {
    return 0; // not started yet
  }
  const details = d.raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0];
  if (!details) {
    return 0;
  }
  const progress = check('status#/properties/progress', defaultPayloadConverter.fromPayload<{ streamedBytes: number }>(details));
  return progress.streamedBytes;
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      throw new Error('timed out waiting');
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
