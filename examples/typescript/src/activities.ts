// The one activity the example's workflows need: reading a run's outcome through a client.
import { Client } from '@temporalio/client';
import { outcomeOf } from './batch';
import { Outcome } from './subflow';

/** createActivities returns the activities of the example's worker, reading runs through client. */
export function createActivities(client: Client) {
  return {
    /**
     * runOutcome returns the outcome of the finished run workflowId. A parent workflow of a
     * core-based SDK (TypeScript, Python, .NET) learns that its child was cancelled without
     * the Canceled failure's details, so it reads the outcome, the partial answer kept, from
     * the run itself.
     */
    async runOutcome(workflowId: string): Promise<Outcome> {
      return outcomeOf(client, workflowId);
    },
  };
}
