import { join } from 'node:path'
import { stateDir } from './paths.js'
import { PHASE_NAMES, type NodeStatus, type PhaseName, type PhaseResult } from '../core/results.js'
import { writeStateFile } from './state-files.js'
import { readRegularFile } from '../core/files.js'

interface JournalEntry {
  status: NodeStatus
  at: string
}

interface JournalFile {
  version: 1
  /** node name -> phase -> the last outcome recorded for it */
  nodes: Record<string, Partial<Record<PhaseName, JournalEntry>>>
}

/**
 * What each phase achieved per node, kept across runs in `.bootstrap/journal.json` and written
 * after every phase (and when interrupted). A rerun uses it to re-check finished nodes cheaply;
 * the live state always wins over it.
 */
export class Journal {
  private constructor(
    private readonly clusterDir: string,
    private readonly path: string,
    private readonly data: JournalFile,
    /** the file on disk was not a journal: it is rewritten at the next save */
    readonly discarded = false,
  ) {}

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

  /** Records a phase's outcome for every node that ran in it (not-run nodes keep what they had). */
  record(phase: PhaseResult): void {
    const at = new Date().toISOString()
    for (const node of phase.nodes) {
      if (node.status === 'not-run') continue
      const entry = (this.data.nodes[node.name] ??= {})
      entry[phase.name] = { status: node.status, at }
    }
  }

  /** The node's stored state was wiped (reset): everything it did before no longer holds. */
  forget(node: string): void {
    delete this.data.nodes[node]
  }

  save(): void {
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
      if (!isObject(entry) || !STATUSES.includes(String(entry.status)) || typeof entry.at !== 'string')
        return `nodes.${node}.${phase} is not {status, at}`
    }
  }
  return undefined
}
