import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { stateDir } from './report.js'
import type { NodeStatus, PhaseName, PhaseResult } from './results.js'

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
    private readonly path: string,
    private readonly data: JournalFile,
  ) {}

  static load(clusterDir: string): Journal {
    const path = join(stateDir(clusterDir), 'journal.json')
    try {
      const data = JSON.parse(readFileSync(path, 'utf8')) as JournalFile
      if (data.version === 1 && data.nodes) return new Journal(path, data)
    } catch {
      // no journal yet, or an unreadable one: start afresh (the live state decides anyway)
    }
    return new Journal(path, { version: 1, nodes: {} })
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
    mkdirSync(join(this.path, '..'), { recursive: true })
    const tmp = `${this.path}.${process.pid}`
    writeFileSync(tmp, `${JSON.stringify(this.data, null, 2)}\n`)
    renameSync(tmp, this.path)
  }
}
