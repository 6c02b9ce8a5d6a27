import { join } from 'node:path'
import { stateDir } from './paths.ts'
import { PHASE_NAMES, type NodeResult, type NodeStatus, type PhaseName, type PhaseResult } from '../core/results.ts'
import { writeStateFile } from './state-files.ts'
import { readRegularFile } from '../core/files.ts'

interface JournalEntry {
  status: NodeStatus
  at: string
  /**
   * When a call that changes the node (the apply) was sent whose outcome this run never learned
   * (killed or interrupted with it in flight): the node may have taken it.
   */
  sent?: string
  /** ok by inference, the node never answering (a worker waiting for the control plane): see `verified` */
  provisional?: true
}

interface JournalFile {
  version: 1
  /** node name -> phase -> the last outcome recorded for it */
  nodes: Record<string, Partial<Record<PhaseName, JournalEntry>>>
}

/**
 * What each phase achieved per node, kept across runs in `.bootstrap/journal.json`: each node's
 * outcome written (atomically) as it happens, and an apply marked before it is sent, so a run killed
 * at any point (kill -9 included) leaves what its nodes did. A rerun uses it to re-check finished
 * nodes cheaply and to know which silent nodes took a config; the live state always wins over it.
 */
export class Journal {
  private readonly clusterDir: string
  private readonly path: string
  private readonly data: JournalFile
  /** the file on disk was not a journal: it is rewritten at the next save */
  readonly discarded: boolean
  private constructor(clusterDir: string, path: string, data: JournalFile, discarded = false) {
    this.clusterDir = clusterDir
    this.path = path
    this.data = data
    this.discarded = discarded
  }

  /** A dry run's journal: read, never written. */
  readOnly = false

  /** A journal of the wrong shape (hand-edited, truncated, another tool's) is ignored with a warning and rewritten. */
  static load(clusterDir: string, warn: (message: string) => void = () => undefined): Journal {
    const path = join(stateDir(clusterDir), 'journal.json')
    let text: string
    try {
      text = readRegularFile(path)
    } catch (err) {
      // no journal yet: start afresh (the live state decides anyway)
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Journal(clusterDir, path, { version: 1, nodes: {} })
      text = ''
    }
    let problem: string | undefined
    try {
      const data: unknown = JSON.parse(text)
      problem = shapeProblem(data)
      if (!problem) return new Journal(clusterDir, path, data as JournalFile)
    } catch (err) {
      problem = `not JSON (${err instanceof Error ? err.message : String(err)})`
    }
    warn(
      `${path}: ignoring a journal of the wrong shape (${problem}); it is rewritten by this run (the live state decides what is left to do)`,
    )
    return new Journal(clusterDir, path, { version: 1, nodes: {} }, true)
  }

  /** The node finished this phase (ok or skipped) in an earlier or this run. */
  done(node: string, phase: PhaseName): boolean {
    const status = this.data.nodes[node]?.[phase]?.status
    return status === 'ok' || status === 'skipped'
  }

  /**
   * The node answered verify in an earlier or this run: a verify that was ok only by inference
   * (provisional: a silent worker taken to wait for the control plane) counts once a later phase of
   * the node ended ok; until then its silence may be an install that never finished.
   */
  verified(node: string): boolean {
    if (!this.done(node, 'verify')) return false
    if (!this.data.nodes[node]?.verify?.provisional) return true
    const later = PHASE_NAMES.slice(PHASE_NAMES.indexOf('verify') + 1)
    return later.some((phase) => this.data.nodes[node]?.[phase]?.status === 'ok')
  }

  /**
   * The node took its config, in an earlier run or this one, or may have: an apply was sent and the
   * run that sent it never learned its outcome. Such a node that does not answer is installing or
   * rebooting, not down.
   */
  tookConfig(node: string): boolean {
    return this.done(node, 'apply') || this.data.nodes[node]?.apply?.sent !== undefined
  }

  /** When a call that changes the node was sent in this phase and its outcome never learned (a run killed with it in flight). */
  sentAt(node: string, phase: PhaseName): string | undefined {
    return this.data.nodes[node]?.[phase]?.sent
  }

  /** Records a phase's outcome for every node that ran in it (not-run nodes keep what they had). */
  record(phase: PhaseResult): void {
    for (const node of phase.nodes) this.put(node.name, phase.name, node.status)
  }

  /** One node's outcome in a phase as soon as it is known, saved at once. */
  recordNode(phase: PhaseName, node: Pick<NodeResult, 'name' | 'status'>, provisional?: true): void {
    const key = `${node.name}\0${phase}`
    if (provisional) this.provisionalThisRun.add(key)
    else this.provisionalThisRun.delete(key)
    if (this.put(node.name, phase, node.status)) this.saveQuietly()
  }

  /** Before a call that changes the node is sent: saved at once, so a run killed with it in flight leaves the mark. */
  sending(node: string, phase: PhaseName): void {
    const entry = (this.data.nodes[node] ??= {})
    entry[phase] = { ...(entry[phase] ?? { status: 'not-run', at: new Date().toISOString() }), sent: new Date().toISOString() }
    this.saveQuietly()
  }

  /** The call's outcome is known (taken, or refused by the node, or never sent): the mark goes, the status stays. */
  settled(node: string, phase: PhaseName, status?: NodeStatus): void {
    const entry = this.data.nodes[node]?.[phase]
    if (!entry) return
    delete entry.sent
    if (status) Object.assign(entry, { status, at: new Date().toISOString() })
    this.saveQuietly()
  }

  /** not-run keeps what the node had; an unsettled `sent` mark stays until its outcome is known */
  /** node and phase outcomes recorded provisional by this run, kept when the phase's results are recorded whole */
  private readonly provisionalThisRun = new Set<string>()

  private put(node: string, phase: PhaseName, status: NodeStatus): boolean {
    const provisional = this.provisionalThisRun.has(`${node}\0${phase}`) ? (true as const) : undefined
    if (status === 'not-run') return false
    const entry = (this.data.nodes[node] ??= {})
    const sent = entry[phase]?.sent
    entry[phase] = {
      status,
      at: new Date().toISOString(),
      ...(sent && status !== 'ok' && status !== 'skipped' ? { sent } : {}),
      ...(provisional && status === 'ok' ? { provisional } : {}),
    }
    return true
  }

  /** The node's stored state was wiped (reset): everything it did before no longer holds. */
  forget(node: string): void {
    delete this.data.nodes[node]
  }

  /**
   * A write as a node's outcome comes in: one that fails (a full disk) must not fail the node that
   * succeeded; the write at the end of the phase reports it.
   */
  private saveQuietly(): void {
    try {
      this.save()
    } catch {
      // see above
    }
  }

  save(): void {
    if (this.readOnly) return
    writeStateFile(this.clusterDir, this.path, `${JSON.stringify(this.data, null, 2)}\n`)
  }
}

const STATUSES: readonly string[] = ['ok', 'skipped', 'failed', 'not-run']
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** What is wrong with a parsed journal, or undefined when it has the shape JournalFile says. */
function shapeProblem(data: unknown): string | undefined {
  if (!isObject(data)) return 'not an object'
  if (data.version !== 1) return `version ${JSON.stringify(data.version)}, expected 1`
  if (!isObject(data.nodes)) return 'nodes is not an object'
  for (const [node, phases] of Object.entries(data.nodes)) {
    if (!isObject(phases)) return `nodes.${node} is not an object`
    for (const [phase, entry] of Object.entries(phases)) {
      if (!(PHASE_NAMES as readonly string[]).includes(phase)) return `nodes.${node}: unknown phase "${phase}"`
      if (
        !isObject(entry) ||
        !STATUSES.includes(String(entry.status)) ||
        typeof entry.at !== 'string' ||
        (entry.sent !== undefined && typeof entry.sent !== 'string') ||
        (entry.provisional !== undefined && entry.provisional !== true)
      )
        return `nodes.${node}.${phase} is not {status, at, sent?, provisional?}`
    }
  }
  return undefined
}
