// The subflow JSON contract as TypeScript types: a hand-written mirror of the JSON Schemas in
// docs/json/ (docs/json.md), trimmed to what this example uses. Nothing here imports a
// subflow package: the workflows are reached by type name.

/** The workflow type of one delegation, and of a batch of them. */
export const START_SUBAGENT = 'StartSubagent';
export const BATCH = 'Batch';
/** The task queue subflow workers serve by default. */
export const SUBFLOW_TASK_QUEUE = 'subflow';

export type StopReason = 'completed' | 'aborted' | 'error' | 'max-tokens' | 'refusal';

export interface Block {
  type: 'text' | 'tool-call';
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
}

export interface Route {
  provider?: string;
  model?: string;
  maxTokens?: number;
  tokenBudget?: number;
}

export interface Request {
  label?: string;
  prompt: Block[];
  parent?: { sessionId?: string; cwd?: string };
  agentOptions?: Route;
  outputSchema?: object;
  maxDepth?: number;
  toolFilter?: { allow?: string[]; deny?: string[] };
  persona?: string;
}

/** docs/json/start-input.schema.json */
export interface StartInput {
  provider: 'spawn' | 'fork' | 'sdk';
  request: Request;
  root?: { cwd: string; route?: Route; preset?: string };
  childId?: string;
  batch?: string;
  /** A duration as a person writes it: "90s", "10m". */
  timeout?: string;
}

/** docs/json/published.schema.json */
export interface Published {
  runId: string;
  childId: string;
  depth: number;
  model?: string;
}

/** docs/json/status.schema.json */
export interface Status {
  phase: string;
  provider: string;
  childId?: string;
  depth?: number;
  stopReason?: StopReason;
  error?: string;
}

/** docs/json/outcome.schema.json */
export interface Outcome {
  childId: string;
  depth: number;
  result: { output: Block[]; structured?: unknown; stopReason: StopReason };
  usage?: { inputTokens: number; outputTokens: number };
  endMessage?: string;
}

/** One task of a batch: docs/json/common.schema.json#/$defs/Task */
export interface Task {
  task: string;
  cwd?: string;
  provider?: 'spawn' | 'fork' | 'sdk';
  modelProvider?: string;
  model?: string;
  label?: string;
  outputSchema?: object;
  timeout?: string;
}

/** docs/json/batch-input.schema.json */
export interface BatchInput {
  batchId?: string;
  tasks?: Task[];
  total: number;
  defaults?: { dir?: string; route?: Route };
  concurrency?: number;
}

/** docs/json/batch-summary.schema.json */
export interface BatchSummary {
  batchId: string;
  total: number;
  queued: number;
  running: number;
  done: number;
  failed: number;
  byStopReason?: Partial<Record<StopReason, number>>;
  startErrors?: { index: number; error?: string }[];
}

/** What a delegation asks for, in the terms of this example. */
export interface Delegation {
  task: string;
  /** An absolute directory on the subflow workers' host: the root session's cwd. */
  cwd: string;
  /** The model route, e.g. {provider: 'deepseek-official', model: 'deepseek-v4-flash'}. */
  route: Route;
  label?: string;
  outputSchema?: object;
  timeout?: string;
}

/** startInput returns the StartSubagent input of d: a spawn child under a new root session. */
export function startInput(d: Delegation): StartInput {
  return {
    provider: 'spawn',
    request: {
      label: d.label,
      prompt: [{ type: 'text', text: d.task }],
      agentOptions: d.route,
      outputSchema: d.outputSchema,
    },
    root: { cwd: d.cwd, route: d.route },
    timeout: d.timeout,
  };
}

/** text returns the text of an outcome's output blocks. */
export function text(out: Outcome): string {
  return out.result.output
    .filter((b) => b.type === 'text')
    .map((b) => b.text ?? '')
    .join('');
}
