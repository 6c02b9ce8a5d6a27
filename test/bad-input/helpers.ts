// Bad-input suite helpers: one simulator per test file, the cluster dir restored between cases,
// and one assertion for the contract every case shares (exit 2, `<path>:<line>: <what> (fix: …)`,
// no stack trace, no call recorded by any simulated node).
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, expect } from 'vitest'
import { E2eCluster, type TaskResult } from '../e2e/harness.js'

export class BadInputBed {
  readonly cluster: E2eCluster
  private readonly pristine: string
  private constructor(cluster: E2eCluster, pristine: string) {
    this.cluster = cluster
    this.pristine = pristine
  }

  /** A 1-control-plane, 2-worker cluster left in maintenance; its cluster dir is saved as it was written. */
  static async start(range: string): Promise<BadInputBed> {
    const cluster = await E2eCluster.start(range, { cps: 1, workers: 2, speed: 3000 })
    const pristine = join(cluster.dir, 'pristine-cluster')
    cpSync(cluster.clusterDir, pristine, { recursive: true, preserveTimestamps: true })
    return new BadInputBed(cluster, pristine)
  }

  get dir(): string {
    return this.cluster.clusterDir
  }

  path(...parts: string[]): string {
    return join(this.cluster.clusterDir, ...parts)
  }

  /** A file of the cluster dir with `from` replaced by `to` (the text must be there). */
  edit(relative: string, from: string | RegExp, to: string): string {
    const file = this.path(relative)
    const before = readFileSync(file, 'utf8')
    const after = before.replace(from, to)
    if (after === before) throw new Error(`edit of ${relative}: ${String(from)} not found`)
    writeFileSync(file, after)
    return file
  }

  /** The generated configs made newer than talconfig.yaml, as `talhelper genconfig` leaves them after an edit. */
  generated(): void {
    this.cluster.generated()
  }

  read(relative: string): string {
    return readFileSync(this.path(relative), 'utf8')
  }

  write(relative: string, text: string): string {
    const file = this.path(relative)
    writeFileSync(file, text)
    return file
  }

  /** Put the cluster dir back as the simulator wrote it (between cases). */
  restore(): void {
    rmSync(this.cluster.clusterDir, { recursive: true, force: true })
    cpSync(this.pristine, this.cluster.clusterDir, { recursive: true, preserveTimestamps: true })
  }

  stop(): Promise<void> {
    return this.cluster.stop()
  }
}

/** One bed per test file: started before its cases, restored after each, stopped at the end. */
export function useBed(range: string): () => BadInputBed {
  let bed: BadInputBed | undefined
  beforeAll(async () => {
    bed = await BadInputBed.start(range)
  })
  afterEach(() => bed?.restore())
  afterAll(async () => {
    await bed?.stop()
  })
  return () => {
    if (!bed) throw new Error('the bad-input bed did not start')
    return bed
  }
}

/** 1-based line of the first line of `file` that matches `pattern` (to state which line an error must name). */
export function lineOf(file: string, pattern: string | RegExp): number {
  const lines = readFileSync(file, 'utf8').split('\n')
  const index = lines.findIndex((l) => (typeof pattern === 'string' ? l.includes(pattern) : pattern.test(l)))
  if (index < 0) throw new Error(`${String(pattern)} not in ${file}`)
  return index + 1
}

export interface Expected {
  /** the file the message must start with; omitted for input that has no file (a flag, a variable) */
  file?: string
  /** the line after the file, when there is one */
  line?: number
  /** what is wrong: matched against the text between the location and ` (fix:` */
  what: RegExp
  /** what to do: matched against the text inside `(fix: …)` */
  fix: RegExp
}

/** The input-error lines of a run: `<location><what> (fix: <fix>)`. */
export function inputErrors(stderr: string): Array<{ line: string; what: string; fix: string }> {
  const found: Array<{ line: string; what: string; fix: string }> = []
  for (const line of stderr.split('\n')) {
    const m = /^(.+?) \(fix: (.+)\)$/.exec(line)
    if (m) found.push({ line, what: m[1] ?? '', fix: m[2] ?? '' })
  }
  return found
}

/** Exit 2, each expected error present in the exact shape, no stack trace, no node touched. */
export function expectBadInput(result: TaskResult, bed: BadInputBed, ...expected: Expected[]): void {
  const context = `exit ${String(result.code)}\nstderr:\n${result.stderr}\nstdout:\n${result.stdout}`
  expect(result.code, context).toBe(2)
  expect(result.stderr, 'no stack trace').not.toMatch(/^\s+at .+\(.+:\d+:\d+\)$/m)
  expect(result.stderr + result.stdout, 'no unexpected error').not.toMatch(/unexpected error|TypeError|ReferenceError/)
  const errors = inputErrors(result.stderr)
  for (const want of expected) {
    // `<path>:<line>: ` exactly (a file with no line where the file has one fails), or no path at all
    const location = want.file ? `${want.file}:${want.line ? `${want.line}:` : ''} ` : ''
    const match = errors.find((e) => {
      if (!e.what.startsWith(location) || (!want.file && e.what.startsWith('/'))) return false
      return want.what.test(e.what.slice(location.length)) && want.fix.test(e.fix)
    })
    expect(match, `an error line "${location}${want.what.source} (fix: ${want.fix.source})" in\n${context}`).toBeDefined()
    expect(match?.fix.trim().length ?? 0, 'a fix that says what to do').toBeGreaterThan(10)
  }
  expect(bed.cluster.calls(), 'no call reached any simulated node').toEqual([])
}
