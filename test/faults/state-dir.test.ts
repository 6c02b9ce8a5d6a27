// Issue 27, item 12: nothing of a run is written outside the cluster directory through its state
// directory. A hard-linked commands.log (its other name outside the cluster directory) is refused
// before any node is touched, or, planted during the run, never appended to; `.bootstrap` swapped for
// a symbolic link in the middle of a run is never written through: the run keeps writing into the
// directory it opened, and still ends with its summary. Range 127.237.2.x–127.237.4.x.
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { withCluster, ROW_TIMEOUT } from './helpers.js'
import { waitFor, type E2eCluster, type TaskResult } from '../e2e/harness.js'

const SUMMARY = /^NODE\s+IP\s+ROLE\s+PREFLIGHT\s+APPLY\s+VERIFY\s+BOOTSTRAP\s+WAIT-READY\s+RESULT$/m

/**
 * Runs bootstrap:talos; once its first apply went out, `away` takes .bootstrap away and a symbolic
 * link to an empty directory outside takes its place. Nothing may be written through it, and the run
 * still ends with its summary.
 */
async function linkedMidRun(c: E2eCluster, away: (state: string) => void): Promise<TaskResult> {
  const state = join(c.clusterDir, '.bootstrap')
  const elsewhere = join(c.dir, 'elsewhere')
  mkdirSync(elsewhere)
  const { done } = c.spawnTask('bootstrap:talos')
  await waitFor(() => c.calls().some((call) => call.call === 'apply') && existsSync(join(state, 'commands.log')), 60_000, 'the first apply')
  away(state)
  symlinkSync(elsewhere, state)
  const result = await done
  expect(readdirSync(elsewhere), 'nothing written through the link').toEqual([])
  expect(result.stdout, result.stderr).toMatch(SUMMARY)
  return result
}

describe.concurrent('the state directory holds the run, whatever is planted in it', () => {
  it(
    'a commands.log hard-linked to a file outside the cluster directory: exit 2 naming it, the file untouched, no node touched',
    async () => {
      await withCluster('127.237.2', { cps: 1, workers: 1, speed: 3000 }, async (c) => {
        const outside = join(c.dir, 'someone-elses.log')
        writeFileSync(outside, 'keep me\n')
        mkdirSync(join(c.clusterDir, '.bootstrap'), { recursive: true })
        const log = join(c.clusterDir, '.bootstrap', 'commands.log')
        linkSync(outside, log)
        const result = await c.task('bootstrap:talos')
        expect(result.code, result.stderr).toBe(2)
        expect(result.stderr).toContain(
          `${log}: has 2 hard links: the tool would write into a file that is also elsewhere (fix: remove it (rm ${log}); the tool recreates the file)`,
        )
        expect(readFileSync(outside, 'utf8')).toBe('keep me\n')
        rmSync(log)
        // the other state files the same way
        for (const name of ['journal.json', 'last-run.json']) {
          const file = join(c.clusterDir, '.bootstrap', name)
          linkSync(outside, file)
          const again = await c.task('bootstrap:apply')
          expect(again.code, again.stderr).toBe(2)
          expect(again.stderr).toContain(`${file}: has 2 hard links`)
          rmSync(file)
        }
        expect(readFileSync(outside, 'utf8')).toBe('keep me\n')
        expect(c.calls()).toEqual([])
      })
    },
    ROW_TIMEOUT,
  )

  it(
    'a hard link planted on commands.log during the run: never appended to, said once, the run goes on to its summary',
    async () => {
      await withCluster('127.237.3', { cps: 1, workers: 1, speed: 100 }, async (c) => {
        const log = join(c.clusterDir, '.bootstrap', 'commands.log')
        const outside = join(c.dir, 'linked-during-the-run.log')
        const { done } = c.spawnTask('bootstrap:talos')
        await waitFor(() => existsSync(log) && readFileSync(log, 'utf8').length > 0, 60_000, 'the first command logged')
        linkSync(log, outside)
        const before = readFileSync(outside, 'utf8')
        const result = await done
        expect(result.code, result.stderr).toBe(0)
        expect(result.stdout).toMatch(SUMMARY)
        expect(readFileSync(outside, 'utf8')).toBe(before)
        expect(result.stderr).toContain(`the command log is not written from here on: ${log}: has 2 hard links`)
      })
    },
    ROW_TIMEOUT,
  )

  it(
    '.bootstrap swapped for a symbolic link mid-run: nothing written through it, the summary printed, the report in the directory the run opened',
    async () => {
      await withCluster('127.237.4', { cps: 1, workers: 1, speed: 100 }, async (c) => {
        const moved = join(c.clusterDir, '.bootstrap-moved')
        const result = await linkedMidRun(c, (state) => renameSync(state, moved))
        expect(result.code, result.stderr).not.toBe(2)
        expect(result.stderr).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m)
        // the run wrote on into the directory it opened, wherever it is now
        const report = JSON.parse(readFileSync(join(moved, 'last-run.json'), 'utf8')) as { command: string }
        expect(report.command).toBe('talos')
        expect(readFileSync(join(moved, 'commands.log'), 'utf8')).toMatch(/talosctl .*kubeconfig/)
        expect(result.stdout).toContain(`report: ${join(moved, 'runs')}`)
      })
    },
    ROW_TIMEOUT,
  )

  it(
    '.bootstrap removed and a symbolic link put in its place mid-run: nothing written through it; the summary, then the write failure named, exit 1',
    async () => {
      await withCluster('127.237.13', { cps: 1, workers: 1, speed: 100 }, async (c) => {
        const state = join(c.clusterDir, '.bootstrap')
        // the run writes into it while it goes: rm's retries take what appears meanwhile (ENOTEMPTY otherwise)
        const result = await linkedMidRun(c, () => rmSync(state, { recursive: true, force: true, maxRetries: 20, retryDelay: 10 }))
        expect(result.code, result.stderr).toBe(1)
        expect(result.stderr).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m)
        expect(result.stderr).toContain(`${state}: is a symbolic link: refusing to write through it`)
      })
    },
    ROW_TIMEOUT,
  )
})
