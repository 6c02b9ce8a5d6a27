// Answers of local tool calls that depend only on the binary, their arguments and their input files
// (`talosctl validate` of a machine config, a client's version): kept in the state directory, so a rerun
// or the next task does not start the same process to learn the same thing (33 validations took 1.5 s
// before upgrade:talos's first node; 300 took 9 s before a bootstrap's first apply). Only successes
// are kept: a failure is asked again, so the operator reads the tool's current text. Deleting the file
// is always safe.
import { createHash } from 'node:crypto'
import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { writeStateFile } from './state-files.ts'

/** The file's name, in the tools' cache directory (`.bootstrap/cache/`). */
export const TOOL_ANSWERS_FILE = 'tool-answers.json'
/** Oldest answers go first past this many: a config edited often leaves one entry per version of it. */
const MAX_ANSWERS = 2000

interface Stored {
  version: 1
  answers: Record<string, { stdout: string; at: number }>
}

export class ToolAnswers {
  private answers: Map<string, { stdout: string; at: number }> | undefined
  private readonly clusterDir: string
  private readonly file: string
  /** `file`: under the cluster's state directory (it is written as the other state files are) */
  constructor(clusterDir: string, file: string) {
    this.clusterDir = clusterDir
    this.file = file
  }

  get(key: string): string | undefined {
    return this.load().get(key)?.stdout
  }

  /** Kept and written at once; a file that cannot be written leaves the answer in memory only (uncached is correct). */
  set(key: string, stdout: string): void {
    const answers = this.load()
    // the newest last, so the oldest go first
    answers.delete(key)
    answers.set(key, { stdout, at: Date.now() })
    while (answers.size > MAX_ANSWERS) answers.delete(answers.keys().next().value as string)
    const stored: Stored = { version: 1, answers: Object.fromEntries(answers) }
    try {
      // atomically, never through a link (state-files.ts)
      writeStateFile(this.clusterDir, this.file, JSON.stringify(stored), 0o600)
    } catch {
      // a full disk or a file planted during the run: this run goes on without keeping it
    }
  }

  private load(): Map<string, { stdout: string; at: number }> {
    if (this.answers) return this.answers
    this.answers = new Map()
    try {
      const stored = JSON.parse(readPlainFile(this.file)) as Partial<Stored>
      if (stored.version !== 1 || typeof stored.answers !== 'object' || stored.answers === null) return this.answers
      const entries = Object.entries(stored.answers)
        .filter(([, a]) => typeof a?.stdout === 'string' && typeof a.at === 'number')
        .sort(([, a], [, b]) => a.at - b.at)
      this.answers = new Map(entries)
    } catch {
      // missing, unreadable or not ours: start empty, the next answer rewrites it
    }
    return this.answers
  }
}

/** A regular file's text, never through a link (O_NOFOLLOW) nor held by a FIFO (O_NONBLOCK). */
function readPlainFile(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`)
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/**
 * What a call's answer depends on, hashed: the binary (its real path, device, inode, size and change
 * time: a rebuilt or replaced binary is another one; hashing a 100 MB file on every call would cost
 * more than the call), the arguments, and each input file's bytes. Undefined when any of them cannot
 * be read: the call then simply runs.
 */
export function answerKey(binaryPath: string, args: string[], files: string[]): string | undefined {
  try {
    const real = realpathSync(binaryPath)
    const s = statSync(real, { bigint: true })
    const hash = createHash('sha256')
    hash.update(JSON.stringify([real, String(s.dev), String(s.ino), String(s.size), String(s.mtimeNs), String(s.ctimeNs), args]))
    for (const file of files) hash.update(createHash('sha256').update(readFileSync(file)).digest('hex'))
    return hash.digest('hex')
  } catch {
    return undefined
  }
}
