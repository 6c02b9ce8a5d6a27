import {
  Listr,
  PRESET_TIMER,
  PRESET_TIMESTAMP,
  type ListrTask,
  type ListrTaskWrapper,
  type ListrDefaultRenderer,
  type ListrSimpleRenderer,
} from 'listr2'
import { errorMessage, InterruptedError, NodeError, StepError } from '../core/errors.ts'
import { hintFor, phaseTask, taskCommand } from '../cli/hints.ts'
import type { ClusterNode } from '../core/model.ts'
import { READ_ONLY_LIMIT, wouldText, type ClusterStep, type NodeOutcome, type NodeStep, type Phase, type StepReporter } from './phase.ts'
import {
  newNodeResult,
  phaseOk,
  type ErrorRecord,
  type NodeResult,
  type PhaseName,
  type PhaseResult,
  type StepResult,
  UNKNOWN_OUTCOME,
} from '../core/results.ts'
import type { Run } from './run.ts'
import { stepReporter } from './step-reporter.ts'
import { escapeControls } from '../core/text.ts'

type Task = ListrTaskWrapper<unknown, ListrDefaultRenderer, ListrSimpleRenderer>

/** Plain line-per-event output in CI, pipes and dumb terminals; the live tree otherwise. */
export function plainOutput(): boolean {
  return process.stdout.isTTY !== true || Boolean(process.env.CI) || process.env.TERM === 'dumb'
}

/** Where each node stands across the phases of one command. */
class Tracker {
  readonly failedIn: Map<string, string>
  constructor(failedIn: Map<string, string>) {
    this.failedIn = failedIn
  }

  /** node name -> why a cluster step of the current phase could not run for it (its later steps skip it) */
  readonly blockedHere = new Map<string, string>()
  stopRequested = false
  /** the first node that failed in a step whose stopOnFailure is 'phase' (cleared with each phase) */
  phaseStoppedAfter: string | undefined
  readonly started = performance.now()
}

/** `node` gives the hint its recovery command; a cluster step's unexpected error names its phase's task. */
function toRecord(err: unknown, node: ClusterNode | undefined, phase: PhaseName): ErrorRecord {
  if (err instanceof NodeError) return { kind: err.kind, message: err.message, hint: err.hint }
  const interrupted = err instanceof InterruptedError || (err as { name?: string } | null)?.name === 'AbortError'
  const kind = interrupted ? 'interrupted' : 'unknown'
  const message = interrupted ? 'interrupted' : errorMessage(err)
  if (node) return { kind, message, hint: hintFor(kind, node) }
  const task = taskCommand(phaseTask(phase))
  return {
    kind,
    message,
    hint: interrupted ? `run it again: ${task} resumes where it stopped` : `read the message above, then run again: ${task}`,
  }
}

/**
 * Runs phases in order as one listr2 tree: per-node subtasks (CONCURRENCY at a time), a node's
 * failure never stops the others (unless --fail-fast), and a node that failed a phase is
 * not-run in the phases after it. Returns a result per phase for the summary and the report.
 */
export async function runPhases(run: Run, phases: Phase[]): Promise<PhaseResult[]> {
  const tracker = new Tracker(run.failed)
  const results: PhaseResult[] = []
  const tasks: ListrTask[] = phases.map((phase) => ({
    title: phase.title,
    task: (_ctx: unknown, task: Task) => {
      // interrupted before this phase: it was never reached, and the report lists only the phases reached
      if (run.signal.aborted) {
        task.skip('interrupted')
        return
      }
      const result: PhaseResult = { name: phase.name, ok: true, durationMs: 0, nodes: run.nodes.map((n) => newNodeResult(n)), steps: [] }
      results.push(result)
      tracker.blockedHere.clear()
      tracker.phaseStoppedAfter = undefined
      const phaseStart = performance.now()
      const steps = phase.steps(run)
      const touched = new Set<string>()
      const lastNodeStep = steps.findLast((step) => step.kind === 'node')
      const stepTasks: ListrTask[] = steps.map((step) =>
        step.kind === 'node'
          ? nodeStepTask(run, tracker, phase.name, step, result, touched, step === lastNodeStep)
          : clusterStepTask(run, tracker, phase.name, step, result),
      )
      stepTasks.push({
        title: 'results',
        task: (_c: unknown, t: Task) => {
          finishPhase(tracker, phase.name, result, touched, run.signal.aborted)
          result.durationMs = performance.now() - phaseStart
          result.ok = phaseOk(result)
          run.journal.record(result)
          if (!run.options.dryRun) run.journal.save()
          t.title = summaryLine(result, run.options.dryRun)
          if (!result.ok) throw new Error(whatFailed(result))
        },
      })
      if (tracker.stopRequested) {
        // never run: every node not-run, so the phase is not ok (phaseOk), and says why
        finishPhase(tracker, phase.name, result, touched)
        result.ok = phaseOk(result)
        task.skip('stopped by --fail-fast')
        return
      }
      return task.newListr(stepTasks, { concurrent: false, exitOnError: false })
    },
  }))

  const listr = new Listr(tasks, {
    concurrent: false,
    exitOnError: false,
    registerSignalListeners: false,
    renderer: 'default',
    fallbackRenderer: 'simple',
    fallbackRendererCondition: plainOutput(),
    rendererOptions: { collapseSubtasks: false, collapseErrors: false, showErrorMessage: true, timer: PRESET_TIMER },
    fallbackRendererOptions: { timestamp: PRESET_TIMESTAMP, timer: PRESET_TIMER },
  })
  await listr.run()
  // interrupted: the results say where each node stood (done, interrupted, not run); the caller
  // sees run.signal.aborted and exits 130
  return results
}

/** `last`: the phase's last node step, after which a node's outcome in the phase is known (and journaled at once). */
function nodeStepTask(
  run: Run,
  tracker: Tracker,
  phase: PhaseName,
  step: NodeStep,
  result: PhaseResult,
  touched: Set<string>,
  last: boolean,
): ListrTask {
  return {
    title: step.title,
    task: (_ctx: unknown, task: Task) => {
      // nodes the step does not act on stay out of the tree (the facts are known by now)
      const listed = run.nodes.filter(
        (n) => !step.applies || step.applies(n, run) || tracker.failedIn.has(n.name) || tracker.blockedHere.has(n.name),
      )
      const shown = step.order ? step.order(listed, run) : listed
      /** stopOnFailure: the first node that failed in this step (or, scoped to the phase, in such a step before it); no new node starts after it */
      let stoppedAfterHere: string | undefined
      const stoppedAfter = (): string | undefined =>
        stoppedAfterHere ?? (step.stopOnFailure === 'phase' ? tracker.phaseStoppedAfter : undefined)
      const nodeTasks: ListrTask[] = shown.map((node) => {
        const record = result.nodes.find((r) => r.name === node.name) as NodeResult
        return {
          title: `${node.name} (${node.address})`,
          task: async (_c: unknown, t: Task) => {
            const blockedBy = tracker.failedIn.get(node.name)
            if (blockedBy) {
              // failed by a cluster step of this phase: keep that failure; else not run here
              if (record.status !== 'failed') {
                record.status = 'not-run'
                record.detail = `failed in ${blockedBy}`
              }
              t.skip(`${node.name}: not run (failed in ${blockedBy})`)
              return
            }
            const notHere = tracker.blockedHere.get(node.name)
            if (notHere) {
              t.skip(`${node.name}: not run (${notHere})`)
              return
            }
            if (tracker.stopRequested) {
              record.status = 'not-run'
              record.detail = 'stopped by --fail-fast'
              t.skip(`${node.name}: not run (--fail-fast)`)
              return
            }
            const stopped = stoppedAfter()
            if (stopped !== undefined) {
              record.status = 'not-run'
              record.detail = `not started (stopped after ${stopped} failed)`
              t.skip(`${node.name}: not started (stopped after ${stopped} failed)`)
              return
            }
            if (run.signal.aborted) {
              record.detail = INTERRUPTED_BEFORE
              t.skip(`${node.name}: not run (interrupted)`)
              return
            }
            touched.add(node.name)
            const started = performance.now()
            record.startedAtMs ??= started - tracker.started
            record.attempts = Math.max(record.attempts, 1)
            const reporter = nodeReporter(run, t, node, record, tracker.started)
            try {
              const outcome: NodeOutcome = (await step.run(node, run, reporter)) ?? { status: 'ok' }
              record.durationMs += performance.now() - started
              if (outcome.detail) record.detail = outcome.detail
              if (outcome.error) record.error = { kind: outcome.error.kind, message: outcome.error.message, hint: outcome.error.hint }
              if (outcome.status === 'skipped') {
                if (record.status !== 'ok') record.status = 'skipped'
                t.skip(`${node.name}: skipped${outcome.detail ? ` (${outcome.detail})` : ''}`)
              } else {
                record.status = 'ok'
                t.title = escapeControls(
                  `${node.name} (${node.address}): ${run.options.dryRun ? wouldText(step, run) : (outcome.detail ?? 'done')}`,
                )
              }
              // a run killed later still leaves what this node did
              if (last) run.journal.recordNode(phase, record, outcome.provisional)
            } catch (err) {
              record.durationMs += performance.now() - started
              record.status = 'failed'
              // whatever the step made of its aborted call, the node was interrupted mid-step
              record.error = run.signal.aborted
                ? interruptedRecord(run, step.title, hintFor('interrupted', node), node.name)
                : toRecord(err, node, phase)
              tracker.failedIn.set(node.name, phase)
              run.journal.recordNode(phase, record)
              if (run.options.failFast) tracker.stopRequested = true
              if (step.stopOnFailure) stoppedAfterHere ??= node.name
              if (step.stopOnFailure === 'phase') tracker.phaseStoppedAfter ??= node.name
              throw new Error(escapeControls(`${node.name}: ${record.error.kind}: ${record.error.message}`))
            }
          },
        }
      })
      return task.newListr(nodeTasks, {
        concurrent: step.concurrency
          ? Math.max(1, step.concurrency(run))
          : step.readOnly
            ? Math.max(run.settings.concurrency, READ_ONLY_LIMIT)
            : run.settings.concurrency,
        exitOnError: false,
      })
    },
  }
}

function clusterStepTask(run: Run, tracker: Tracker, phase: PhaseName, step: ClusterStep, result: PhaseResult): ListrTask {
  return {
    title: step.title,
    task: async (_ctx: unknown, task: Task) => {
      const record: StepResult = { name: step.name, status: 'not-run', durationMs: 0 }
      result.steps.push(record)
      const blocked = (cause: string, error: ErrorRecord | undefined, perNode?: StepError['perNode']): void => {
        for (const node of run.nodes) {
          // a node keeps the cause of the first step that stopped it
          if (tracker.failedIn.has(node.name) || (!error && tracker.blockedHere.has(node.name)) || !(step.blocks?.(node, run) ?? false))
            continue
          const nodeRecord = result.nodes.find((r) => r.name === node.name) as NodeResult
          nodeRecord.status = error ? 'failed' : 'not-run'
          nodeRecord.detail = cause
          if (error) {
            // a step that names each node's own cause and hint gives the node its own
            const own = perNode?.get(node.name) ?? error
            nodeRecord.error = { ...own, message: `${step.name}: ${own.message}` }
            tracker.failedIn.set(node.name, phase)
          } else {
            tracker.blockedHere.set(node.name, cause)
          }
        }
      }
      if (tracker.stopRequested) {
        record.detail = 'stopped by --fail-fast'
        task.skip(`${step.title}: not run (--fail-fast)`)
        return
      }
      if (run.signal.aborted) {
        record.detail = 'interrupted before it ran'
        task.skip(`${step.title}: not run (interrupted)`)
        return
      }
      const ready = step.ready ? step.ready(run) : true
      if (typeof ready === 'object') {
        record.status = 'skipped'
        record.detail = ready.skip
        if (ready.next) record.next = ready.next
        task.skip(`${step.title}: ${ready.skip}`)
        return
      }
      if (ready !== true) {
        record.detail = ready
        blocked(`${step.name} not run: ${ready}`, undefined)
        task.skip(`${step.title}: not run (${ready})`)
        return
      }
      const started = performance.now()
      record.startedAtMs = Math.round(started - tracker.started)
      const shows = progressFilter(plainOutput())
      const reporter = stepReporter(run, {
        progress: (text) => {
          if (shows(text)) task.output = escapeControls(text)
        },
        retrying: (attempt, error, delayMs) =>
          (task.output = escapeControls(
            `attempt ${attempt} failed (${error.kind}: ${error.message}); retrying in ${Math.round(delayMs)}ms`,
          )),
      })
      try {
        const detail = await step.run(run, reporter)
        if (typeof detail === 'object') {
          // left to another command by the node selection (a skip without one: it does not apply)
          if (detail.next) record.next = detail.next
          if ('notRun' in detail) {
            record.detail = detail.notRun
            blocked(`${step.name} not run: ${detail.notRun}`, undefined)
            task.skip(escapeControls(`${step.title}: not run (${detail.notRun})`))
          } else {
            record.status = 'skipped'
            record.detail = detail.skip
            task.skip(escapeControls(`${step.title}: ${detail.skip}`))
          }
          return
        }
        record.status = 'ok'
        if (detail) record.detail = detail
        if (run.options.dryRun) task.title = escapeControls(`${step.title}: ${wouldText(step, run)}`)
        else if (detail) task.title = escapeControls(`${step.title}: ${detail}`)
      } catch (err) {
        record.status = 'failed'
        if (run.signal.aborted) {
          // the nodes waiting on it were not run: they stay not-run (finishPhase says why)
          record.error = interruptedRecord(run, step.title, toRecord(err, undefined, phase).hint, undefined)
          throw new Error(`${step.name}: interrupted`)
        }
        record.error = toRecord(err, undefined, phase)
        blocked(`${step.name} failed`, record.error, err instanceof StepError ? err.perNode : undefined)
        if (run.options.failFast) tracker.stopRequested = true
        throw new Error(escapeControls(`${step.name}: ${record.error.kind}: ${record.error.message}`))
      } finally {
        record.durationMs = performance.now() - started
      }
    },
  }
}

const INTERRUPTED_BEFORE = 'interrupted before it ran'

/**
 * A node or cluster step the interruption caught in flight: what it was doing and by what it was
 * stopped. A changing call it cut short (an apply, the etcd bootstrap, a reset, a helm install) may
 * have taken effect or not: the outcome is unknown, never "did not run", and the next run reads the
 * node before deciding. `node`: the node step's node; a cluster step (they run one at a time) owns
 * the calls cut short that name no node of a node step.
 */
function interruptedRecord(run: Run, doing: string, hint: string, node: string | undefined): ErrorRecord {
  const reason: unknown = run.signal.reason
  const why = reason instanceof Error ? reason.message : 'interrupted'
  const cut = run.tools.cutShort.filter((call) => node === undefined || call.node === node)
  if (cut.length === 0) return { kind: 'interrupted', message: `${why} during: ${doing}`, hint }
  const calls = cut.map((call) => run.tools.commandLine(call)).join('; ')
  return {
    kind: 'interrupted',
    message: `${UNKNOWN_OUTCOME}: ${why} during: ${doing}, while \`${calls}\` was in flight: it may have taken effect or not (the next run reads the live state before deciding)`,
    hint,
  }
}

/** In plain output (a pipe, CI), a waiting node's line repeats at most this often while its state stays the same. */
export const PLAIN_REPEAT_MS = 30_000

/**
 * What a progress line says, without the elapsed times in it (`booting for 12s` and `booting for 17s`
 * are one state): a plain log gets a line when this changes.
 */
export function progressState(text: string): string {
  return text.replace(/\b(?:\d+(?:\.\d+)?(?:ms|h|m|s))+\b/g, '#')
}

/**
 * Whether a progress line goes out: a terminal redraws in place, so every change does; a plain log
 * gets a line when the state changes, and at most every PLAIN_REPEAT_MS otherwise.
 */
export function progressFilter(plain: boolean, now: () => number = () => performance.now()): (text: string) => boolean {
  let lastText: string | undefined
  let lastState: string | undefined
  let lastAt = -Infinity
  return (text) => {
    if (text === lastText) return false
    const state = progressState(text)
    if (plain && state === lastState && now() - lastAt < PLAIN_REPEAT_MS) return false
    lastText = text
    lastState = state
    lastAt = now()
    return true
  }
}

function nodeReporter(run: Run, task: Task, node: ClusterNode, record: NodeResult, runStarted: number): StepReporter {
  const shows = progressFilter(plainOutput())
  return stepReporter(run, {
    progress: (text) => {
      if (shows(text)) task.output = escapeControls(`${node.name}: ${text}`)
    },
    retrying: (attempt, error, delayMs) => {
      record.attempts = Math.max(record.attempts, attempt + 1)
      ;(record.retries ??= []).push({
        attempt,
        kind: error.kind,
        message: error.message,
        delayMs: Math.round(delayMs),
        atMs: Math.round(performance.now() - runStarted),
      })
      task.output = `${node.name}: attempt ${attempt} failed (${error.kind}); retrying in ${(delayMs / 1000).toFixed(1)}s`
    },
  })
}

/** Nodes no step touched were skipped (nothing to do) unless they were blocked. */
function finishPhase(tracker: Tracker, phase: PhaseName, result: PhaseResult, touched: Set<string>, aborted = false): void {
  for (const record of result.nodes) {
    if (record.status !== 'not-run' || touched.has(record.name)) continue
    const blockedBy = tracker.failedIn.get(record.name)
    if (blockedBy && blockedBy !== phase) {
      record.detail = `failed in ${blockedBy}`
    } else if (tracker.stopRequested) {
      record.detail ??= 'stopped by --fail-fast'
    } else if (aborted) {
      record.detail ??= INTERRUPTED_BEFORE
    } else if (!record.detail) {
      record.status = 'skipped'
      record.detail = 'nothing to do'
    }
  }
}

/** The phase's failure in a few words (the title beside it has the counts): which nodes or steps. */
function whatFailed(result: PhaseResult): string {
  const names = (status: string): string[] => result.nodes.filter((n) => n.status === status).map((n) => n.name)
  const steps = result.steps.filter((s) => s.status === 'failed').map((s) => s.name)
  if (names('failed').length > 0) return names('failed').join(', ')
  if (steps.length > 0) return steps.join(', ')
  return `${names('not-run').join(', ')} not run`
}

/**
 * `apply: 5 ok, 0 skipped, 1 failed, 0 not run`, and why anything did not run (a failed step, the
 * phase a node failed in); a dry run's "ok" is what would run.
 */
export function summaryLine(result: PhaseResult, dryRun: boolean): string {
  const count = (status: string): number => result.nodes.filter((n) => n.status === status).length
  const parts = [
    `${count('ok')} ${dryRun ? 'would run' : 'ok'}`,
    `${count('skipped')} skipped`,
    `${count('failed')} failed`,
    `${count('not-run')} not run`,
  ]
  const why: string[] = []
  for (const step of result.steps) {
    if (step.status === 'failed') why.push(`${step.name} failed`)
    else if (step.status === 'not-run' && step.detail) why.push(`${step.name} not run: ${step.detail}`)
  }
  const notRun = new Map<string, string[]>()
  for (const node of result.nodes.filter((n) => n.status === 'not-run')) {
    const cause = node.detail ?? 'not reached'
    notRun.set(cause, [...(notRun.get(cause) ?? []), node.name])
  }
  for (const [cause, names] of notRun) {
    // a node a step of this phase blocked is explained by that step
    if (!result.steps.some((step) => cause.startsWith(`${step.name} `))) why.push(`${names.join(', ')}: ${cause}`)
  }
  return `${result.name}${dryRun ? ' (dry run)' : ''}: ${parts.join(', ')}${why.length > 0 ? ` (${why.join('; ')})` : ''}`
}
