import type { NodeError } from '../core/errors.ts'
import type { PollAnswer } from '../wait/poll.ts'
import type { ClusterNode } from '../core/model.ts'
import type { PhaseName } from '../core/results.ts'
import type { Run } from './run.ts'

/** What a node step reports back: done, or nothing needed doing (skipped), with a short detail. */
export interface NodeOutcome {
  status: 'ok' | 'skipped'
  detail?: string
  error?: NodeError
  /**
   * ok by inference, without the node answering (a worker whose API waits for the control plane):
   * the journal keeps it unconfirmed until a later phase of the same node ends ok
   */
  provisional?: true
}

/** Handed to every step: live progress for the display and retry bookkeeping for the report. */
export interface StepReporter {
  /** one line under the node's task (stage, what it waits for) */
  progress(text: string): void
  /** a transient failure that will be retried */
  retrying(attempt: number, error: NodeError, delayMs: number): void
  /**
   * The run's retry policy around one call (wait/retry.ts), each retry reported here. `retries`:
   * which transient errors are retried (default: all); the others go back to the caller at once.
   */
  retry<T>(attempt: (n: number) => Promise<T>, options?: { retries?: (error: NodeError) => boolean }): Promise<T>
  /** The run's poller (wait/poll.ts): `check` every poll interval until done or `timeoutMs`, each state shown as progress. */
  poll<T>(check: (elapsedMs: number) => Promise<PollAnswer<T>>, timeoutMs: number): Promise<T>
}

/** Nodes read at once by a read-only step: an unreachable node costs its retries once, not once per node. */
export const READ_ONLY_LIMIT = 16

export interface NodeStep {
  kind: 'node'
  title: string
  /**
   * Only reads (probes, status): runs for up to READ_ONLY_LIMIT nodes at once whatever CONCURRENCY,
   * which bounds the steps that change nodes.
   */
  readOnly?: boolean
  /** what a dry run says for each node ("would apply the config"); default: would run "<title>" */
  would?: string
  /** the nodes this step acts on; the others pass through unchanged */
  applies?: (node: ClusterNode, run: Run) => boolean
  /** nodes worked on at once by this step (1: one control plane at a time); default CONCURRENCY */
  concurrency?: (run: Run) => number
  /**
   * The first failure in this step stops it taking new nodes: those in flight finish, the others are
   * not-run (`not started (stopped after <node> failed)`). The run's fail-fast, scoped to one step;
   * `'phase'`: scoped to every such step of the phase (a control plane that failed keeps the workers'
   * step from starting any node).
   */
  stopOnFailure?: boolean | 'phase'
  /** the order nodes start in (read when the step starts: a plan before it may decide it); default the inventory's */
  order?: (nodes: ClusterNode[], run: Run) => ClusterNode[]
  run: (node: ClusterNode, run: Run, report: StepReporter) => Promise<NodeOutcome | void>
}

export interface ClusterStep {
  kind: 'cluster'
  /** name in the report's steps list */
  name: string
  title: string
  /** what a dry run says ("would bootstrap etcd on cp-1"); default: would run "<title>" */
  would?: string | ((run: Run) => string)
  /** nodes that cannot go on when this step fails (they fail with its cause) */
  blocks?: (node: ClusterNode, run: Run) => boolean
  /**
   * true: run it. A string: it cannot run (not-run; the nodes it blocks are not-run with that
   * reason). `{ skip }`: nothing to do here (skipped; nobody is blocked), `next` the command that
   * would do it when it was left to another command.
   */
  ready?: (run: Run) => true | string | { skip: string; next?: string }
  /** its detail; or, when what it found leaves the change to another command, a StepLeft */
  run: (run: Run, report: StepReporter) => Promise<string | void | StepLeft>
}

/**
 * A cluster-wide step that changes the cluster, found with its nodes outside the selection (NODES):
 * not run (the selected nodes cannot go on without it, they are not-run with its reason) or skipped
 * (they can), and the command that runs it; a skip without `next`: the step does not apply here.
 */
export type StepLeft = { notRun: string; next: string } | { skip: string; next?: string }

export type Step = NodeStep | ClusterStep

/** A dry run's wording for a step: nothing ran, so say what would. */
export function wouldText(step: Step, run: Run): string {
  const would = typeof step.would === 'function' ? step.would(run) : step.would
  return would ?? `would run "${step.title}"`
}

/** A phase says what to do, per node and cluster-wide, and nothing else. */
export interface Phase {
  name: PhaseName
  title: string
  /** offline input checks before any node is touched; throws InputError (exit 2) */
  check?: (run: Run) => Promise<void>
  steps: (run: Run) => Step[]
}
